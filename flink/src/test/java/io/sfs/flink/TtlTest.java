package io.sfs.flink;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.operators.testutils.MockEnvironment;
import org.apache.flink.runtime.operators.testutils.MockEnvironmentBuilder;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyedStateBackendParametersImpl;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.memory.MemCheckpointStreamFactory;
import org.apache.flink.runtime.state.ttl.TtlTimeProvider;
import org.apache.flink.util.concurrent.FutureUtils;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.concurrent.RunnableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * State TTL on Flink's real clock: Flink's TTL wrapper decides what a read returns, and sfs's
 * maintenance physically drops what has expired — a checkpoint taken after the TTL has passed
 * holds none of it. (The operator harness runs on a mock TTL clock, which sfs does not stamp
 * with: this test builds a backend as a TaskManager does, on TtlTimeProvider.DEFAULT.)
 */
class TtlTest {
    static final int KEYS = 3000;

    static AbstractKeyedStateBackend<String> backend(Path tmp, MockEnvironment env) throws Exception {
        return backend(tmp, env, Collections.emptyList());
    }

    static AbstractKeyedStateBackend<String> backend(
            Path tmp, MockEnvironment env, java.util.Collection<KeyedStateHandle> restore) throws Exception {
        return SfsBackendSmokeTest.backend(tmp).createKeyedStateBackend(
                new KeyedStateBackendParametersImpl<>(
                        env, new JobID(), "ttl-test", StringSerializer.INSTANCE, 128,
                        new KeyGroupRange(0, 127), env.getTaskKvStateRegistry(), TtlTimeProvider.DEFAULT,
                        new UnregisteredMetricsGroup(), restore, new CloseableRegistry()));
    }

    static KeyedStateHandle checkpoint(AbstractKeyedStateBackend<String> b, long id) throws Exception {
        RunnableFuture<SnapshotResult<KeyedStateHandle>> f = b.snapshot(
                id, id, new MemCheckpointStreamFactory(1 << 30), CheckpointOptions.forCheckpointWithDefaultLocation());
        return FutureUtils.runIfNotDoneAndGet(f).getJobManagerOwnedSnapshot();
    }

    static <T extends org.apache.flink.api.common.state.StateDescriptor<?, ?>> T ttl(T d, long ms) {
        if (ms > 0) {
            d.enableTimeToLive(StateTtlConfig.newBuilder(Duration.ofMillis(ms)).build());
        }
        return d;
    }

    static long checkpointBytes(AbstractKeyedStateBackend<String> b, long id) throws Exception {
        RunnableFuture<SnapshotResult<KeyedStateHandle>> f = b.snapshot(
                id, id, new MemCheckpointStreamFactory(1 << 30), CheckpointOptions.forCheckpointWithDefaultLocation());
        return FutureUtils.runIfNotDoneAndGet(f).getJobManagerOwnedSnapshot().getStateSize();
    }

    /** Writes KEYS keys of value, list and map state; waits past the TTL; checkpoints. */
    static long[] run(Path tmp, long ttlMs) throws Exception {
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = backend(tmp, env);
            try {
                ValueState<String> v = b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
                        ttl(new ValueStateDescriptor<>("v", Types.STRING), ttlMs));
                ListState<String> l = b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
                        ttl(new ListStateDescriptor<>("l", Types.STRING), ttlMs));
                MapState<String, String> m = b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
                        ttl(new MapStateDescriptor<>("m", Types.STRING, Types.STRING), ttlMs));
                long t0 = System.currentTimeMillis();
                for (int i = 0; i < KEYS; i++) {
                    b.setCurrentKey("key-" + i);
                    v.update("value-" + i);
                    l.add("element-" + i);
                    m.put("uk", "mapped-" + i);
                }
                b.setCurrentKey("key-" + (KEYS - 1));
                if (ttlMs == 0 || System.currentTimeMillis() - t0 < ttlMs / 2) {
                    // before the TTL (a loaded machine may take longer to write: then skipped)
                    assertThat(v.value()).isEqualTo("value-" + (KEYS - 1));
                    assertThat(m.get("uk")).isEqualTo("mapped-" + (KEYS - 1));
                }
                Thread.sleep(Math.max(ttlMs * 2, 400));
                long[] out = new long[3];
                b.setCurrentKey("key-7");
                out[0] = v.value() == null ? 0 : 1;
                out[1] = m.get("uk") == null && !l.get().iterator().hasNext() ? 0 : 1;
                out[2] = checkpointBytes(b, 1);
                return out;
            } finally {
                b.dispose();
            }
        }
    }

    /** A TTL state's live entries survive a checkpoint and a restore, values intact. */
    @Test
    void liveTtlStateRestoresIntact(@TempDir Path tmp) throws Exception {
        ValueStateDescriptor<String> vd = ttl(new ValueStateDescriptor<>("v", Types.STRING), 60_000);
        MapStateDescriptor<String, String> md = ttl(new MapStateDescriptor<>("m", Types.STRING, Types.STRING), 60_000);
        ListStateDescriptor<String> ld = ttl(new ListStateDescriptor<>("l", Types.STRING), 60_000);
        KeyedStateHandle h;
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = backend(tmp, env);
            try {
                for (int i = 0; i < 100; i++) {
                    b.setCurrentKey("key-" + i);
                    b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, vd).update("value-" + i);
                    b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, md).put("uk", "mapped-" + i);
                    b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, ld).add("e-" + i);
                }
                h = checkpoint(b, 1);
            } finally {
                b.dispose();
            }
        }
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = backend(tmp, env, Collections.singletonList(h));
            try {
                for (int i = 0; i < 100; i++) {
                    b.setCurrentKey("key-" + i);
                    assertThat(b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, vd).value())
                            .isEqualTo("value-" + i);
                    assertThat(b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, md).get("uk"))
                            .isEqualTo("mapped-" + i);
                    assertThat(b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, ld).get())
                            .containsExactly("e-" + i);
                }
            } finally {
                b.dispose();
            }
        }
    }

    @Test
    void expiredStateIsNotReturnedAndMaintenanceDropsIt(@TempDir Path tmp) throws Exception {
        long[] withTtl = run(tmp.resolve("ttl"), 1000);
        long[] without = run(tmp.resolve("none"), 0);
        assertThat(withTtl[0]).as("an expired value read").isEqualTo(0);
        assertThat(withTtl[1]).as("an expired list or map read").isEqualTo(0);
        assertThat(without[0]).as("a value without TTL").isEqualTo(1);
        // KEYS x 3 entries of ~20 bytes without TTL; with it, the checkpoint holds none of them
        assertThat(without[2]).as("checkpoint bytes without TTL").isGreaterThan(KEYS * 40L);
        assertThat(withTtl[2]).as("checkpoint bytes after the TTL passed").isLessThan(without[2] / 10);
    }
}
