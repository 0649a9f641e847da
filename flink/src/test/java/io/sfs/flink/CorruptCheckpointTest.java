package io.sfs.flink;

import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.operators.testutils.MockEnvironment;
import org.apache.flink.runtime.operators.testutils.MockEnvironmentBuilder;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle.HandleAndLocalPath;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A checkpoint whose files are corrupt or missing is refused at restore with a message that
 * names the file, and an earlier checkpoint of the same backend still restores (what an
 * operator falls back to, with execution.state-recovery.path).
 */
class CorruptCheckpointTest {
    static final ValueStateDescriptor<String> VD = new ValueStateDescriptor<>("v", Types.STRING);

    static String root(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            b.append(c.getMessage()).append(" | ");
        }
        return b.toString();
    }

    /** Checkpoints 1 (k=a) and 2 (k=b) of one backend. */
    static IncrementalRemoteKeyedStateHandle[] twoCheckpoints(Path dir) throws Exception {
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = TtlTest.backend(dir, env);
            try {
                b.setCurrentKey("k");
                b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, VD).update("a");
                KeyedStateHandle h1 = TtlTest.checkpoint(b, 1);
                b.setCurrentKey("k");
                b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, VD).update("b");
                KeyedStateHandle h2 = TtlTest.checkpoint(b, 2); // not confirmed: shares nothing
                return new IncrementalRemoteKeyedStateHandle[] {
                    (IncrementalRemoteKeyedStateHandle) h1, (IncrementalRemoteKeyedStateHandle) h2};
            } finally {
                b.dispose();
            }
        }
    }

    static String restoreAndRead(Path dir, KeyedStateHandle h) throws Exception {
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = TtlTest.backend(dir, env, Collections.singletonList(h));
            try {
                b.setCurrentKey("k");
                return b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, VD).value();
            } finally {
                b.dispose();
            }
        }
    }

    static IncrementalRemoteKeyedStateHandle with(
            IncrementalRemoteKeyedStateHandle h, StreamStateHandle meta, List<HandleAndLocalPath> shared) {
        return new IncrementalRemoteKeyedStateHandle(h.getBackendIdentifier(), h.getKeyGroupRange(),
                h.getCheckpointId(), shared, h.getPrivateState(), meta);
    }

    @Test
    void corruptMetaFileIsRefusedByNameAndTheEarlierCheckpointRestores() throws Exception {
        Path dir = SfsBackendSmokeTest.SHARED_DIR;
        IncrementalRemoteKeyedStateHandle[] h = twoCheckpoints(dir);
        StreamStateHandle bad = new ByteStreamStateHandle("corrupt-meta-of-2", new byte[] {1, 2, 3, 4, 5, 6, 7, 8});
        assertThatThrownBy(() -> restoreAndRead(dir, with(h[1], bad, h[1].getSharedState())))
                .satisfies(t -> assertThat(root(t)).contains("corrupt-meta-of-2").contains("not an sfs checkpoint"));
        assertThat(restoreAndRead(dir, h[0])).isEqualTo("a");
        assertThat(restoreAndRead(dir, h[1])).isEqualTo("b");
    }

    @Test
    void missingDataFileIsRefusedByName() throws Exception {
        Path dir = SfsBackendSmokeTest.SHARED_DIR;
        IncrementalRemoteKeyedStateHandle[] h = twoCheckpoints(dir);
        List<HandleAndLocalPath> shared = new ArrayList<>(h[1].getSharedState());
        assertThat(shared).isNotEmpty();
        HandleAndLocalPath first = shared.get(0);
        StreamStateHandle gone = new StreamStateHandle() {
            @Override
            public org.apache.flink.core.fs.FSDataInputStream openInputStream() throws java.io.IOException {
                throw new java.io.FileNotFoundException("/checkpoints/shared/deleted-file");
            }

            @Override
            public Optional<byte[]> asBytesIfInMemory() {
                return Optional.empty();
            }

            @Override
            public org.apache.flink.runtime.state.PhysicalStateHandleID getStreamStateHandleID() {
                return new org.apache.flink.runtime.state.PhysicalStateHandleID("deleted-file");
            }

            @Override
            public void discardState() {}

            @Override
            public long getStateSize() {
                return 1;
            }
        };
        shared.set(0, HandleAndLocalPath.of(gone, first.getLocalPath()));
        assertThatThrownBy(() -> restoreAndRead(dir, with(h[1], h[1].getMetaDataStateHandle(), shared)))
                .satisfies(t -> assertThat(root(t)).contains(first.getLocalPath()).contains("deleted-file"));
        assertThat(restoreAndRead(dir, h[0])).isEqualTo("a");
    }
}
