package io.sfs.flink;

import io.sfs.flink.jni.SfsException;

import org.apache.flink.runtime.operators.testutils.MockEnvironment;
import org.apache.flink.runtime.operators.testutils.MockEnvironmentBuilder;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;

import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * One sfs group per host, shared by its TaskManagers ({@code state.backend.sfs.group}): the
 * group is started beside them ({@code sfs run --host --job NAME --workers 2}); a second JVM
 * attaches and holds a slot; this JVM's subtask gets the other slot, empty; a third subtask finds
 * no slot; once the other JVM is killed with {@code kill -9}, its slot is free — emptied in
 * place for the next subtask — and the group goes on, not tied to either JVM.
 */
class SharedGroupTest {

    @Test
    void taskManagersShareTheHostGroupSlotBySlot() throws Exception {
        String name = "sfs-shared-" + ProcessHandle.current().pid();
        Path data = TestBackends.dataDir("shared-group");
        String bin = TestBackends.binDir();
        Path log = data.resolve("group.log");
        Process group = new ProcessBuilder(
                        Paths.get(bin, "sfs").toString(), "run", "--job", name, "--host", "--workers", "2",
                        "--backend", "table", "--data", data.resolve("group").toString(),
                        "--watch-pid", Long.toString(ProcessHandle.current().pid()))
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
        Process child = null;
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!(Files.exists(log) && Files.readString(log).contains("job " + name + " started"))) {
                assertThat(group.isAlive()).as("the group runs: %s", Files.exists(log) ? Files.readString(log) : "").isTrue();
                assertThat(System.nanoTime()).as("the group started").isLessThan(deadline);
                Thread.sleep(20);
            }

            // another TaskManager of the host holds a slot
            String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
            child = new ProcessBuilder(List.of(
                            java, "-cp", System.getProperty("java.class.path"),
                            "-Djava.library.path=" + System.getProperty("java.library.path"),
                            SharedGroupChild.class.getName(), name, data.resolve("child").toString()))
                    .redirectErrorStream(true)
                    .start();
            BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
            StringBuilder seen = new StringBuilder();
            String line;
            while ((line = r.readLine()) != null && !line.startsWith("READY")) {
                seen.append(line).append('\n');
            }
            assertThat(line).as("the other JVM opened a slot:\n%s", seen).startsWith("READY slot=");
            int childSlot = Integer.parseInt(line.substring("READY slot=".length()));

            SfsStateBackend shared = new SfsStateBackend().setGroup(name).setDataDir(data.resolve("me").toString());
            try (MockEnvironment env = new MockEnvironmentBuilder().build();
                    MockEnvironment env2 = new MockEnvironmentBuilder().build()) {
                AbstractKeyedStateBackend<String> a = SlotReuseTest.open(shared, env, Collections.emptyList());
                try {
                    assertThat(((SfsKeyedStateBackend<?>) a).slot).as("not the other JVM's slot").isNotEqualTo(childSlot);
                    assertThat(SlotReuseTest.dump(a, SlotReuseTest.KEYS)).as("a new subtask's state").isEmpty();
                    SlotReuseTest.write(a, 0, 5, "a");

                    assertThatThrownBy(() -> SlotReuseTest.open(shared, env2, Collections.emptyList()))
                            .as("a third subtask while both slots are held")
                            .hasStackTraceContaining("has all its 2 worker slots in use (by this and the host's other TaskManagers)");

                    child.destroyForcibly(); // kill -9: its slot's context dies with it
                    child.waitFor(30, TimeUnit.SECONDS);

                    AbstractKeyedStateBackend<String> b = SlotReuseTest.open(shared, env2, Collections.emptyList());
                    try {
                        assertThat(((SfsKeyedStateBackend<?>) b).slot).as("the dead JVM's slot").isEqualTo(childSlot);
                        assertThat(SlotReuseTest.dump(b, SlotReuseTest.KEYS)).as("the dead JVM's state, emptied").isEmpty();
                        SlotReuseTest.write(b, 0, 3, "b");
                        assertThat(SlotReuseTest.dump(b, SlotReuseTest.KEYS)).isEqualTo(SlotReuseTest.expected(0, 3, "b"));
                    } finally {
                        b.dispose();
                    }
                    assertThat(SlotReuseTest.dump(a, SlotReuseTest.KEYS)).isEqualTo(SlotReuseTest.expected(0, 5, "a"));
                    assertThat(group.isAlive()).as("the group outlives the JVMs that used it").isTrue();
                } finally {
                    a.dispose();
                }
            }
            assertThat(Files.readString(log)).as("the group's log").contains("store emptied");
        } catch (SfsException e) {
            throw new AssertionError(e.getMessage() + "; the group's log:\n" + Files.readString(log), e);
        } finally {
            if (child != null) {
                child.destroyForcibly();
            }
            group.destroy(); // SIGTERM: it stops its children and removes its segments
            group.waitFor(20, TimeUnit.SECONDS);
        }
    }
}
