package io.sfs.flink;

import org.apache.flink.runtime.operators.testutils.MockEnvironment;
import org.apache.flink.runtime.operators.testutils.MockEnvironmentBuilder;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;

import java.util.Collections;

/**
 * A second TaskManager stand-in for {@link SharedGroupTest}: a JVM that attaches to the host's
 * group (args: group name, data directory), opens one keyed subtask, writes, says
 * "READY slot=N" and waits to be killed.
 */
public final class SharedGroupChild {
    public static void main(String[] args) throws Exception {
        SfsStateBackend backend = new SfsStateBackend().setGroup(args[0]).setDataDir(args[1]);
        MockEnvironment env = new MockEnvironmentBuilder().build();
        AbstractKeyedStateBackend<String> b = SlotReuseTest.open(backend, env, Collections.emptyList());
        SlotReuseTest.write(b, 0, SlotReuseTest.KEYS, "child");
        System.out.println("READY slot=" + ((SfsKeyedStateBackend<?>) b).slot);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
