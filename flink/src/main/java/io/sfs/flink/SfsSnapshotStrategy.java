package io.sfs.flink;

import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.core.memory.DataOutputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.state.CheckpointStreamFactory;
import org.apache.flink.runtime.state.CheckpointStreamWithResultProvider;
import org.apache.flink.runtime.state.CheckpointedStateScope;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeOffsets;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.SnapshotResources;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.SnapshotStrategy;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;

import io.sfs.flink.jni.SfsException;
import io.sfs.flink.jni.SfsNative;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A checkpoint of one subtask's sfs state.
 *
 * <p>Synchronous phase (task thread, at the barrier): {@code sfs_barrier} seals the subtask's
 * write buffer — O(1), no I/O, no wait for maintenance — and the states' meta infos are taken.
 *
 * <p>Asynchronous phase (Flink's snapshot thread): waits until the group's compactor has
 * flushed that buffer and staged the subtask's store as of the barrier (immutable files), reads
 * the staged store ({@code sfs_stage_scan}), and writes it to one checkpoint stream of Flink's,
 * grouped by key group with their offsets: a {@link KeyGroupsStateHandle}, which Flink's own
 * assignment clips to each new subtask's range at a restore or a rescale. Then it removes the
 * stage directory. The format ({@link SfsSnapshotFormat}) carries Flink's meta infos (serializer
 * snapshots), so a restore checks compatibility as Flink's backends do.
 *
 * <p>What this costs and what is missing: every checkpoint writes the whole state (no file is
 * shared between checkpoints yet: the staged files are immutable and could be uploaded once
 * each, as Flink's incremental RocksDB snapshots do — the next step), and the staged entries are
 * grouped by key group in this JVM's heap while the stream is written.
 */
final class SfsSnapshotStrategy<K> implements SnapshotStrategy<KeyedStateHandle, SfsSnapshotStrategy.Resources> {
    private final SfsKeyedStateBackend<K> backend;

    SfsSnapshotStrategy(SfsKeyedStateBackend<K> backend) {
        this.backend = backend;
    }

    static final class Resources implements SnapshotResources {
        final long checkpointId;
        final List<StateMetaInfoSnapshot> metas = new ArrayList<>();
        /** sfs state id -> its index in the snapshot's meta list. */
        final Map<Integer, Integer> index = new HashMap<>();
        /** sfs state ids of states whose entries carry sfs's TTL expiry. */
        final java.util.Set<Integer> ttlIds = new java.util.HashSet<>();
        final Map<Integer, Integer> kinds = new HashMap<>();
        final List<Long> ttls = new ArrayList<>();

        Resources(long checkpointId) {
            this.checkpointId = checkpointId;
        }

        @Override
        public void release() {}
    }

    @Override
    public Resources syncPrepareResources(long checkpointId) {
        Resources r = new Resources(checkpointId);
        for (SfsKeyedStateBackend.Registered s : backend.registeredInOrder()) {
            r.index.put(s.sfsId, r.metas.size());
            r.kinds.put(s.sfsId, s.kind);
            r.metas.add(s.meta.snapshot());
            r.ttls.add(s.ttlMs);
            if (s.ttlMs > 0) {
                r.ttlIds.add(s.sfsId);
            }
        }
        SfsNative.barrier(backend.ctxHandle, SfsKeyedStateBackend.barrierOf(checkpointId));
        backend.sealed(SfsKeyedStateBackend.barrierOf(checkpointId));
        return r;
    }

    @Override
    public SnapshotResultSupplier<KeyedStateHandle> asyncSnapshot(
            Resources res,
            long checkpointId,
            long timestamp,
            CheckpointStreamFactory streamFactory,
            CheckpointOptions checkpointOptions) {
        KeyGroupRange range = backend.getKeyGroupRange();
        return registry -> {
            String dir = awaitStaged(backend, SfsKeyedStateBackend.barrierOf(checkpointId));
            Map<Integer, ByteArrayOutputStream> byKg = new HashMap<>();
            try {
                scan(dir, res, byKg);
            } finally {
                synchronized (backend.nativeLock) {
                    if (!backend.nativeClosed()) {
                        SfsNative.dropStage(backend.ctxHandle, dir);
                    }
                }
            }
            CheckpointStreamWithResultProvider stream =
                    CheckpointStreamWithResultProvider.createSimpleStream(
                            CheckpointedStateScope.EXCLUSIVE, streamFactory);
            registry.registerCloseable(stream);
            KeyGroupRangeOffsets offsets = new KeyGroupRangeOffsets(range);
            DataOutputView out = new DataOutputViewStreamWrapper(stream.getCheckpointOutputStream());
            SfsSnapshotFormat.writeHeader(
                    out,
                    new KeyedBackendSerializationProxy<>(
                            backend.getKeySerializer(), res.metas, false),
                    res.ttls);
            for (int kg = range.getStartKeyGroup(); kg <= range.getEndKeyGroup(); kg++) {
                offsets.setKeyGroupOffset(kg, stream.getCheckpointOutputStream().getPos());
                ByteArrayOutputStream b = byKg.get(kg);
                if (b != null) {
                    b.writeTo(stream.getCheckpointOutputStream());
                }
                out.writeShort(SfsSnapshotFormat.END_OF_KEY_GROUP);
            }
            if (!registry.unregisterCloseable(stream)) {
                throw new IOException("sfs-flink: the checkpoint stream was closed (cancelled)");
            }
            SnapshotResult<KeyedStateHandle> result =
                    CheckpointStreamWithResultProvider.toKeyedStateHandleSnapshotResult(
                            stream.closeAndFinalizeCheckpointStreamResult(), offsets, KeyGroupsStateHandle::new);
            KeyedStateHandle jm = result.getJobManagerOwnedSnapshot();
            if (jm instanceof KeyGroupsStateHandle) {
                backend.written.put(checkpointId, new SfsKeyedStateBackend.Written(
                        checkpointId, handleId((KeyGroupsStateHandle) jm), res.metas, res.ttls));
            }
            return result;
        };
    }

    /** sfs's TTL expiry at the front of a stored value (common/ttl.h: a native uint64). */
    static long expiryOf(byte[] v) {
        return java.nio.ByteBuffer.wrap(v, 0, 8).order(java.nio.ByteOrder.nativeOrder()).getLong();
    }

    /** What identifies a checkpoint file across the JobManager's round trip. */
    static String handleId(KeyGroupsStateHandle h) {
        return h.getStreamStateHandleID().getKeyString();
    }

    /** Polls the stage in short native waits, so a dispose is never held up for long. */
    static String awaitStaged(SfsKeyedStateBackend<?> backend, long id) throws IOException {
        long deadline = System.nanoTime() + backend.settings.stageTimeoutMs * 1_000_000L;
        while (true) {
            synchronized (backend.nativeLock) {
                if (backend.nativeClosed()) {
                    throw new IOException("sfs-flink: the backend was closed during checkpoint " + id);
                }
                try {
                    return SfsNative.staged(backend.ctxHandle, id, 50);
                } catch (SfsException e) {
                    if (!e.getMessage().contains("not staged after") || System.nanoTime() > deadline) {
                        throw new IOException("sfs-flink: checkpoint " + id + ": " + e.getMessage(), e);
                    }
                }
            }
            Thread.yield();
        }
    }

    private void scan(String dir, Resources res, Map<Integer, ByteArrayOutputStream> byKg)
            throws IOException {
        IOException[] failed = new IOException[1];
        long now = System.currentTimeMillis();
        synchronized (backend.nativeLock) {
            if (backend.nativeClosed()) {
                throw new IOException("sfs-flink: the backend was closed during a checkpoint");
            }
            SfsNative.scan(
                    backend.ctxHandle,
                    dir,
                    (state, kg, ns, key, ukey, value) -> {
                        Integer idx = res.index.get(state);
                        if (idx == null || failed[0] != null) {
                            return; // a state another subtask of this group registered
                        }
                        if (res.ttlIds.contains(state)) {
                            // sfs's expiry in front (native order): an expired entry is one
                            // Flink expired too (sfs's is never earlier); the rest, unprefixed
                            if (value == null || value.length < 8 || expiryOf(value) <= now) {
                                return;
                            }
                            value = java.util.Arrays.copyOfRange(value, 8, value.length);
                        }
                        ByteArrayOutputStream b = byKg.computeIfAbsent(kg, k -> new ByteArrayOutputStream());
                        try {
                            SfsSnapshotFormat.writeEntry(
                                    new DataOutputStream(b), idx, key, (int) ns, ukey, value);
                        } catch (IOException e) {
                            failed[0] = e;
                        }
                    });
        }
        if (failed[0] != null) {
            throw failed[0];
        }
    }
}
