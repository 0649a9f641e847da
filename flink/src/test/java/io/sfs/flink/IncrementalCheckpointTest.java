package io.sfs.flink;

import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.operators.testutils.MockEnvironment;
import org.apache.flink.runtime.operators.testutils.MockEnvironmentBuilder;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle.HandleAndLocalPath;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.PlaceholderStreamStateHandle;
import org.apache.flink.runtime.state.SharedStateRegistry;
import org.apache.flink.runtime.state.SharedStateRegistryImpl;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Collections;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Checkpoints are incremental: the staged data files a checkpoint uploaded are referred to by
 * the next one (a placeholder Flink's shared-state registry resolves), which uploads only what
 * changed; a restore from the later checkpoint, its placeholders resolved as the JobManager
 * resolves them, gives back every entry.
 */
class IncrementalCheckpointTest {
    static final int KEYS = 20_000;

    @Test
    void secondCheckpointUploadsOnlyTheDelta(@TempDir Path tmp) throws Exception {
        ValueStateDescriptor<String> vd = new ValueStateDescriptor<>("v", Types.STRING);
        MapStateDescriptor<String, Long> md = new MapStateDescriptor<>("m", Types.STRING, Types.LONG);
        IncrementalRemoteKeyedStateHandle h1, h2;
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = TtlTest.backend(tmp, env);
            try {
                ValueState<String> v = b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, vd);
                MapState<String, Long> m = b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, md);
                for (int i = 0; i < KEYS; i++) {
                    b.setCurrentKey("key-" + i);
                    v.update("a value of some length, number " + i);
                    m.put("u" + (i % 5), (long) i);
                }
                h1 = (IncrementalRemoteKeyedStateHandle) TtlTest.checkpoint(b, 1);
                b.notifyCheckpointComplete(1);
                for (int i = 0; i < 50; i++) {
                    b.setCurrentKey("key-" + i);
                    v.update("changed " + i);
                }
                h2 = (IncrementalRemoteKeyedStateHandle) TtlTest.checkpoint(b, 2);
                b.notifyCheckpointComplete(2);
            } finally {
                b.dispose();
            }
        }
        long placeholders = h2.getSharedState().stream()
                .filter(f -> f.getHandle() instanceof PlaceholderStreamStateHandle).count();
        assertThat(placeholders).as("files of checkpoint 1 that checkpoint 2 refers to").isGreaterThan(0);
        assertThat(h2.getCheckpointedSize()).as("bytes checkpoint 2 uploaded")
                .isLessThan(h1.getCheckpointedSize() / 4);

        // the JobManager's side: register both, which resolves checkpoint 2's placeholders
        SharedStateRegistry registry = new SharedStateRegistryImpl();
        h1.registerSharedStates(registry, 1);
        h2.registerSharedStates(registry, 2);
        for (HandleAndLocalPath f : h2.getSharedState()) {
            assertThat(f.getHandle()).isNotInstanceOf(PlaceholderStreamStateHandle.class);
        }
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = TtlTest.backend(tmp, env, Collections.singletonList(h2));
            try {
                ValueState<String> v = b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, vd);
                MapState<String, Long> m = b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, md);
                for (int i = 0; i < KEYS; i += 7) {
                    b.setCurrentKey("key-" + i);
                    assertThat(v.value()).isEqualTo(i < 50 ? "changed " + i : "a value of some length, number " + i);
                    assertThat(m.get("u" + (i % 5))).isEqualTo((long) i);
                }
            } finally {
                b.dispose();
            }
        }
        registry.close();
    }
}
