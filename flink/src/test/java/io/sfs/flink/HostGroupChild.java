package io.sfs.flink;

import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;

import java.nio.file.Paths;

/**
 * A TaskManager stand-in for {@link JvmKillTest}: a JVM that opens sfs keyed state (its host
 * group starts), writes, checkpoints, says READY and waits to be killed.
 */
public final class HostGroupChild {
    public static void main(String[] args) throws Exception {
        KeyedOneInputStreamOperatorTestHarness<String, String, String> h =
                SfsBackendSmokeTest.harness(Paths.get(args[0]));
        h.open();
        for (int i = 0; i < 1000; i++) {
            h.processElement("k" + (i % 37), i);
        }
        h.snapshot(1, 1000);
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
