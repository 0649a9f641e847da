package io.sfs.flink;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.operators.testutils.MockEnvironment;
import org.apache.flink.runtime.operators.testutils.MockEnvironmentBuilder;
import org.apache.flink.runtime.state.LocalRecoveryConfig;
import org.apache.flink.runtime.state.TestTaskStateManager;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Flink's local recovery served by sfs in place: a task restarted on the same TaskManager from
 * the checkpoint its slot pinned takes the slot back and the compactor returns its store to
 * that checkpoint — no file read — with the result a restore from files gives. Writes sealed
 * and flushed after the checkpoint (a later checkpoint that never completed) must be gone.
 */
class LocalRecoveryTest {

    static KeyedOneInputStreamOperatorTestHarness<String, String, String> harness(Path tmp, boolean local)
            throws Exception {
        MockEnvironment env = new MockEnvironmentBuilder()
                .setTaskStateManager(new TestTaskStateManager(new LocalRecoveryConfig(local, false, null)))
                .setMaxParallelism(128)
                .build();
        KeyedOneInputStreamOperatorTestHarness<String, String, String> h =
                new KeyedOneInputStreamOperatorTestHarness<>(
                        new KeyedProcessOperator<>(new SfsBackendSmokeTest.Counter()),
                        v -> v.substring(0, 1), Types.STRING, env);
        h.setStateBackend(SfsBackendSmokeTest.backend(tmp));
        return h;
    }

    /** Checkpoint 1 completes; later writes are sealed and flushed by checkpoint 2, which does not. */
    static OperatorSubtaskState runUntilFailure(Path tmp, boolean local) throws Exception {
        OperatorSubtaskState snap;
        try (KeyedOneInputStreamOperatorTestHarness<String, String, String> h = harness(tmp, local)) {
            h.open();
            h.processElement("a1", 1);
            h.processElement("a2", 2);
            h.processElement("b1", 3);
            snap = h.snapshot(1, 4);
            h.notifyOfCompletedCheckpoint(1);
            h.processElement("b9", 5);
            h.processElement("a7", 6);
            h.snapshot(2, 7); // staged by the compactor, never completed
            h.processElement("a8", 8); // only in the active buffer
        } // the task fails: its backend is disposed
        return snap;
    }

    static Object[] restartFrom(Path tmp, boolean local, OperatorSubtaskState snap) throws Exception {
        long before = SfsHostGroup.LOCAL_RESTORES.get();
        try (KeyedOneInputStreamOperatorTestHarness<String, String, String> h = harness(tmp, local)) {
            h.initializeState(snap);
            h.open();
            h.processElement("a1", 9);
            h.processElement("b1", 10);
            return new Object[] {h.extractOutputValues(), SfsHostGroup.LOCAL_RESTORES.get() - before};
        }
    }

    @Test
    void restartOnTheSameTaskManagerGoesBackInPlace(@TempDir Path tmp) throws Exception {
        OperatorSubtaskState snap = runUntilFailure(tmp, true);
        Object[] r = restartFrom(tmp, true, snap);
        assertThat(r[1]).as("restores in place").isEqualTo(1L);
        assertThat(r[0]).asList().containsExactly("a:3:3:2", "b:2:2:2");
    }

    @Test
    void withoutLocalRecoveryTheFilesServe(@TempDir Path tmp) throws Exception {
        OperatorSubtaskState snap = runUntilFailure(tmp, false);
        Object[] r = restartFrom(tmp, false, snap);
        assertThat(r[1]).as("restores in place").isEqualTo(0L);
        assertThat(r[0]).asList().containsExactly("a:3:3:2", "b:2:2:2");
    }

    @Test
    void anOlderCheckpointThanThePinnedOneComesFromFiles(@TempDir Path tmp) throws Exception {
        OperatorSubtaskState first;
        try (KeyedOneInputStreamOperatorTestHarness<String, String, String> h = harness(tmp, true)) {
            h.open();
            h.processElement("a1", 1);
            first = h.snapshot(1, 2);
            h.notifyOfCompletedCheckpoint(1);
            h.processElement("a2", 3);
            h.snapshot(2, 4);
            h.notifyOfCompletedCheckpoint(2); // the slot pins 2
        }
        Object[] r = restartFrom(tmp, true, first);
        assertThat(r[1]).as("restores in place").isEqualTo(0L);
        assertThat(r[0]).asList().containsExactly("a:2:2:2", "b:1:1:1");
    }
}
