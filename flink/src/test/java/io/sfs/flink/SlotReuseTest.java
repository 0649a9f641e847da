package io.sfs.flink;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.runtime.operators.testutils.MockEnvironment;
import org.apache.flink.runtime.operators.testutils.MockEnvironmentBuilder;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyedStateBackendParametersImpl;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.ttl.TtlTimeProvider;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A TaskManager's host group reuses its worker slots: with one slot, subtask after subtask
 * (new jobs, restores from files) opens in the same slot, which is emptied in place before each
 * (SFS_WORKER_RESET). Each must see only its own state — none of the slot's last subtask's —
 * and its sfs barriers must go on above the slot's last, though a new job's checkpoint ids
 * start again at 1.
 */
class SlotReuseTest {
    static final int KEYS = 50;

    static final ValueStateDescriptor<String> V = new ValueStateDescriptor<>("v", Types.STRING);
    static final ListStateDescriptor<String> L = new ListStateDescriptor<>("l", Types.STRING);
    static final MapStateDescriptor<String, String> M = new MapStateDescriptor<>("m", Types.STRING, Types.STRING);

    /** One slot, a group of its own (the other unit tests' group has 48). */
    static final SfsStateBackend ONE_SLOT =
            new SfsStateBackend()
                    .setBinDir(TestBackends.binDir())
                    .setDataDir(TestBackends.dataDir("slot-reuse").toString())
                    .setSlots(1);

    static AbstractKeyedStateBackend<String> open(MockEnvironment env, Collection<KeyedStateHandle> restore)
            throws Exception {
        return open(ONE_SLOT, env, restore);
    }

    static AbstractKeyedStateBackend<String> open(
            SfsStateBackend backend, MockEnvironment env, Collection<KeyedStateHandle> restore) throws Exception {
        return backend.createKeyedStateBackend(
                new KeyedStateBackendParametersImpl<>(
                        env, new JobID(), "slot-reuse", StringSerializer.INSTANCE, 128,
                        new KeyGroupRange(0, 127), env.getTaskKvStateRegistry(), TtlTimeProvider.DEFAULT,
                        new UnregisteredMetricsGroup(), restore, new CloseableRegistry()));
    }

    /** Writes keys [from, to) tagged @tag into value, list and map state. */
    static void write(AbstractKeyedStateBackend<String> b, int from, int to, String tag) throws Exception {
        for (int i = from; i < to; i++) {
            b.setCurrentKey("key-" + i);
            value(b).update(tag + i);
            list(b).add(tag + i);
            map(b).put("uk", tag + i);
        }
    }

    static ValueState<String> value(AbstractKeyedStateBackend<String> b) throws Exception {
        return b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, V);
    }

    static ListState<String> list(AbstractKeyedStateBackend<String> b) throws Exception {
        return b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, L);
    }

    static MapState<String, String> map(AbstractKeyedStateBackend<String> b) throws Exception {
        return b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, M);
    }

    /** Every key's value, list and map entry as "key=v|l1,l2|m" (absent parts empty), sorted. */
    static List<String> dump(AbstractKeyedStateBackend<String> b, int keys) throws Exception {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < keys; i++) {
            b.setCurrentKey("key-" + i);
            String v = value(b).value();
            List<String> l = new ArrayList<>();
            Iterable<String> it = list(b).get();
            if (it != null) {
                it.forEach(l::add);
            }
            String m = map(b).get("uk");
            if (v != null || !l.isEmpty() || m != null) {
                out.add("key-" + i + "=" + v + "|" + String.join(",", l) + "|" + m);
            }
        }
        Collections.sort(out);
        return out;
    }

    static List<String> expected(int from, int to, String tag) {
        List<String> out = new ArrayList<>();
        for (int i = from; i < to; i++) {
            out.add("key-" + i + "=" + tag + i + "|" + tag + i + "|" + tag + i);
        }
        Collections.sort(out);
        return out;
    }

    static List<String> keysOf(AbstractKeyedStateBackend<String> b) throws Exception {
        value(b); // registered, so getKeys can list it
        try (var s = b.getKeys("v", VoidNamespace.INSTANCE)) {
            return s.sorted().collect(Collectors.toList());
        }
    }

    @Test
    void aReusedSlotStartsEmptyAndItsBarriersGoOn() throws Exception {
        KeyedStateHandle first;
        // job 1: every key, checkpoint 5
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = open(env, Collections.emptyList());
            try {
                write(b, 0, KEYS, "a");
                first = TtlTest.checkpoint(b, 5);
                write(b, 0, KEYS, "after-checkpoint-"); // written after it: must not come back
            } finally {
                b.dispose();
            }
        }
        // job 2 in the same (only) slot: nothing of job 1; its checkpoint 1 is below job 1's 5
        KeyedStateHandle second;
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = open(env, Collections.emptyList());
            try {
                assertThat(keysOf(b)).as("keys of a new subtask in a reused slot").isEmpty();
                assertThat(dump(b, KEYS)).as("state of a new subtask in a reused slot").isEmpty();
                write(b, KEYS / 2, KEYS / 2 + 5, "b");
                second = TtlTest.checkpoint(b, 1);
                assertThat(dump(b, KEYS)).isEqualTo(expected(KEYS / 2, KEYS / 2 + 5, "b"));
            } finally {
                b.dispose();
            }
        }
        // job 1 restored from its checkpoint 5, in the same slot: exactly its state
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = open(env, Collections.singletonList(first));
            try {
                assertThat(dump(b, KEYS)).as("job 1 restored from files in a reused slot")
                        .isEqualTo(expected(0, KEYS, "a"));
                assertThat(keysOf(b)).hasSize(KEYS);
                TtlTest.checkpoint(b, 6);
            } finally {
                b.dispose();
            }
        }
        // and job 2 again: its own five keys only
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = open(env, Collections.singletonList(second));
            try {
                assertThat(dump(b, KEYS)).as("job 2 restored from files in a reused slot")
                        .isEqualTo(expected(KEYS / 2, KEYS / 2 + 5, "b"));
                TtlTest.checkpoint(b, 2);
            } finally {
                b.dispose();
            }
        }
    }

    /** Subtask after subtask in one slot: 20 openings, each with one checkpoint and a restore. */
    @Test
    void oneSlotServesAnyNumberOfSubtasks() throws Exception {
        KeyedStateHandle last = null;
        for (int round = 0; round < 20; round++) {
            try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
                AbstractKeyedStateBackend<String> b =
                        open(env, last == null ? Collections.emptyList() : Collections.singletonList(last));
                try {
                    assertThat(dump(b, round + 2)).as("round %d", round)
                            .isEqualTo(expected(0, round, "r"));
                    write(b, round, round + 1, "r");
                    last = TtlTest.checkpoint(b, round + 1);
                    write(b, round + 1, round + 2, "lost-"); // after the checkpoint
                } finally {
                    b.dispose();
                }
            }
        }
    }
}
