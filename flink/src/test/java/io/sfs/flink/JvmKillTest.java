package io.sfs.flink;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A TaskManager JVM killed with kill -9 leaves no sfs process and no sfs segment behind: its
 * host group's supervisor watches the JVM (--watch-pid), stops the compactor and checkpointer
 * and removes the segments.
 */
class JvmKillTest {

    /** Live (not zombie) processes whose command line names the job. */
    static List<Long> processesOf(String job) throws IOException {
        List<Long> out = new ArrayList<>();
        try (Stream<Path> procs = Files.list(Paths.get("/proc"))) {
            for (Path p : (Iterable<Path>) procs::iterator) {
                String name = p.getFileName().toString();
                if (!name.chars().allMatch(Character::isDigit)) {
                    continue;
                }
                try {
                    String cmd = new String(Files.readAllBytes(p.resolve("cmdline")), StandardCharsets.UTF_8);
                    String stat = Files.readString(p.resolve("stat"));
                    char state = stat.charAt(stat.lastIndexOf(')') + 2);
                    if (cmd.contains(job) && state != 'Z' && state != 'X') {
                        out.add(Long.parseLong(name));
                    }
                } catch (IOException gone) {
                    // exited while we looked
                }
            }
        }
        return out;
    }

    static List<Path> segmentsOf(String job) throws IOException {
        try (Stream<Path> s = Files.list(Paths.get("/dev/shm"))) {
            return s.filter(p -> p.getFileName().toString().startsWith("sfs." + job)).toList();
        }
    }

    @Test
    void killedJvmLeavesNoProcessOrSegment(@TempDir Path tmp) throws Exception {
        String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = new ArrayList<>(List.of(
                java,
                "-cp", System.getProperty("java.class.path"),
                "-Djava.library.path=" + System.getProperty("java.library.path"),
                "-Dsfs.bin=" + System.getProperty("sfs.bin", new File("../bin").getAbsolutePath()),
                HostGroupChild.class.getName(),
                tmp.toString()));
        Process child = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String job = "flink-" + child.pid() + "-";
        try {
            BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            String line;
            StringBuilder seen = new StringBuilder();
            while ((line = r.readLine()) != null && !line.equals("READY")) {
                seen.append(line).append('\n');
                assertThat(System.nanoTime()).as("child never got READY:\n%s", seen).isLessThan(deadline);
            }
            assertThat(line).as("child exited before READY:\n%s", seen).isEqualTo("READY");
            assertThat(processesOf(job)).as("the group's processes while the JVM lives").isNotEmpty();
            assertThat(segmentsOf(job)).as("the group's segment while the JVM lives").isNotEmpty();

            child.destroyForcibly(); // SIGKILL: no shutdown hook runs
            child.waitFor(30, TimeUnit.SECONDS);

            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
            while (System.nanoTime() < until && (!processesOf(job).isEmpty() || !segmentsOf(job).isEmpty())) {
                Thread.sleep(100);
            }
            assertThat(processesOf(job)).as("sfs processes left after kill -9 of the JVM").isEmpty();
            assertThat(segmentsOf(job)).as("sfs segments left after kill -9 of the JVM").isEmpty();
        } finally {
            child.destroyForcibly();
            for (long pid : processesOf(job)) {
                ProcessHandle.of(pid).ifPresent(ProcessHandle::destroy); // SIGTERM: it removes its segments
            }
        }
    }
}
