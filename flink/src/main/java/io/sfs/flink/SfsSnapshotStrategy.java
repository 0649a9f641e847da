package io.sfs.flink;

import org.apache.flink.core.memory.DataOutputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.checkpoint.SnapshotType;
import org.apache.flink.runtime.state.CheckpointStateOutputStream;
import org.apache.flink.runtime.state.CheckpointStreamFactory;
import org.apache.flink.runtime.state.CheckpointedStateScope;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle.HandleAndLocalPath;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.PlaceholderStreamStateHandle;
import org.apache.flink.runtime.state.SnapshotResources;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.SnapshotStrategy;
import org.apache.flink.runtime.state.StateUtil;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;

import io.sfs.flink.jni.SfsException;
import io.sfs.flink.jni.SfsNative;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An incremental checkpoint of one subtask's sfs state.
 *
 * <p>Synchronous phase (task thread, at the barrier): {@code sfs_barrier} seals the subtask's
 * write buffer — O(1), no I/O, no wait for maintenance — and the states' meta infos and the
 * confirmed uploads are taken.
 *
 * <p>Asynchronous phase (Flink's snapshot thread): waits until the group's compactor has
 * flushed that buffer and staged the subtask's store as of the barrier, then hands Flink the
 * staged files: those under {@code shared/} (the table target's data files: immutable, named
 * uniquely within the store) are uploaded once, and a later checkpoint that stages the same
 * file refers to the upload of the last completed checkpoint with a placeholder, which Flink's
 * {@code SharedStateRegistry} resolves and counts; the rest (the tables' descriptions and
 * deletion vectors) and a meta file ({@link SfsSnapshotFormat}) are uploaded each time. The
 * result is Flink's {@link IncrementalRemoteKeyedStateHandle}, so Flink owns the uploaded files'
 * lifetime — its registry deletes a shared file when no retained checkpoint refers to it, as it
 * does for RocksDB's — and sfs owns only its stage directory, removed once uploaded. A
 * savepoint shares nothing: everything is uploaded into it.
 *
 * <p>Only uploads of a completed checkpoint are referred to (an upload of a checkpoint that
 * failed may be gone): {@link #notifyComplete} confirms them, {@link #notifyAborted} drops them.
 */
final class SfsSnapshotStrategy<K>
        implements SnapshotStrategy<KeyedStateHandle, SfsSnapshotStrategy.Resources> {
    private static final Logger LOG = LoggerFactory.getLogger(SfsSnapshotStrategy.class);
    private final SfsKeyedStateBackend<K> backend;

    /** Checkpoint id -> its shared files (name -> the upload it refers to); under itself. */
    private final TreeMap<Long, Map<String, StreamStateHandle>> uploads = new TreeMap<>();
    private long lastCompleted = -1;

    SfsSnapshotStrategy(SfsKeyedStateBackend<K> backend) {
        this.backend = backend;
    }

    static final class Resources implements SnapshotResources {
        final long checkpointId;
        final List<StateMetaInfoSnapshot> metas = new ArrayList<>();
        final List<SfsSnapshotFormat.StateIds> ids = new ArrayList<>();
        /** The shared files of the last completed checkpoint: what may be referred to. */
        final Map<String, StreamStateHandle> confirmed;

        Resources(long checkpointId, Map<String, StreamStateHandle> confirmed) {
            this.checkpointId = checkpointId;
            this.confirmed = confirmed;
        }

        @Override
        public void release() {}
    }

    @Override
    public Resources syncPrepareResources(long checkpointId) {
        Map<String, StreamStateHandle> confirmed;
        synchronized (uploads) {
            Map<String, StreamStateHandle> m = uploads.get(lastCompleted);
            confirmed = m == null ? Collections.emptyMap() : new HashMap<>(m);
        }
        Resources r = new Resources(checkpointId, confirmed);
        for (SfsKeyedStateBackend.Registered s : backend.registeredInOrder()) {
            r.metas.add(s.meta.snapshot());
            r.ids.add(new SfsSnapshotFormat.StateIds(s.ttlMs, s.sfsId, s.kind));
        }
        long barrier = backend.barrierOf(checkpointId);
        SfsNative.barrier(backend.ctxHandle, barrier);
        backend.sealed(barrier);
        return r;
    }

    @Override
    public SnapshotResultSupplier<KeyedStateHandle> asyncSnapshot(
            Resources res,
            long checkpointId,
            long timestamp,
            CheckpointStreamFactory streamFactory,
            CheckpointOptions checkpointOptions) {
        boolean sharing = checkpointOptions.getCheckpointType().getSharingFilesStrategy()
                != SnapshotType.SharingFilesStrategy.NO_SHARING;
        return registry -> {
            long t0 = System.nanoTime();
            String dir = awaitStaged(backend, backend.barrierOf(checkpointId));
            long staged = System.nanoTime();
            List<StreamStateHandle> uploaded = new ArrayList<>();
            boolean ok = false;
            try {
                List<HandleAndLocalPath> shared = new ArrayList<>();
                List<HandleAndLocalPath> priv = new ArrayList<>();
                Map<String, StreamStateHandle> mine = new HashMap<>();
                long persisted = 0;
                for (Path f : files(Paths.get(dir, SfsNative.SHARED))) {
                    String name = f.getFileName().toString();
                    String local = SfsNative.SHARED + "/" + name;
                    StreamStateHandle base = sharing ? res.confirmed.get(name) : null;
                    if (base != null) {
                        shared.add(HandleAndLocalPath.of(placeholder(base), local));
                        mine.put(name, base);
                        continue;
                    }
                    StreamStateHandle h = upload(f, sharing ? CheckpointedStateScope.SHARED
                            : CheckpointedStateScope.EXCLUSIVE, streamFactory, registry);
                    uploaded.add(h);
                    persisted += h.getStateSize();
                    (sharing ? shared : priv).add(HandleAndLocalPath.of(h, local));
                    mine.put(name, h);
                }
                for (Path f : files(Paths.get(dir))) {
                    StreamStateHandle h = upload(f, CheckpointedStateScope.EXCLUSIVE, streamFactory, registry);
                    uploaded.add(h);
                    persisted += h.getStateSize();
                    priv.add(HandleAndLocalPath.of(h, f.getFileName().toString()));
                }
                StreamStateHandle meta = writeMeta(res, streamFactory, registry);
                uploaded.add(meta);
                persisted += meta.getStateSize();
                // where a checkpoint's asynchronous phase goes: the compactor's flush and staging,
                // then the upload (bench/RESULTS.md reads these lines)
                LOG.debug("sfs-flink: checkpoint {}: staged after {} ms, {} files ({} bytes) uploaded in {} ms",
                        checkpointId, (staged - t0) / 1_000_000, uploaded.size(), persisted,
                        (System.nanoTime() - staged) / 1_000_000);
                IncrementalRemoteKeyedStateHandle handle = new IncrementalRemoteKeyedStateHandle(
                        backend.backendId, backend.getKeyGroupRange(), checkpointId, shared, priv, meta,
                        persisted);
                if (sharing) {
                    synchronized (uploads) {
                        uploads.put(checkpointId, mine);
                    }
                }
                backend.written.put(checkpointId, new SfsKeyedStateBackend.Written(
                        checkpointId, handleId(handle), res.metas, res.ids));
                ok = true;
                return SnapshotResult.of(handle);
            } finally {
                if (!ok) {
                    StateUtil.bestEffortDiscardAllStateObjects(uploaded);
                }
                synchronized (backend.nativeLock) {
                    if (!backend.nativeClosed()) {
                        SfsNative.dropStage(backend.ctxHandle, dir);
                    }
                }
            }
        };
    }

    /** A checkpoint completed: its uploads become the ones later checkpoints refer to. */
    void notifyComplete(long id) {
        synchronized (uploads) {
            if (id > lastCompleted && uploads.containsKey(id)) {
                uploads.headMap(id).clear();
                lastCompleted = id;
            }
        }
    }

    void notifyAborted(long id) {
        synchronized (uploads) {
            uploads.remove(id);
        }
    }

    /** A reference to an earlier upload, resolved by Flink's shared-state registry. */
    private static StreamStateHandle placeholder(StreamStateHandle h) {
        return new PlaceholderStreamStateHandle(
                h.getStreamStateHandleID(),
                h.getStateSize(),
                org.apache.flink.runtime.checkpoint.filemerging.FileMergingSnapshotManager.isFileMergingHandle(h));
    }

    private static List<Path> files(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            return Collections.emptyList();
        }
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(Files::isRegularFile).sorted().toList();
        }
    }

    private static StreamStateHandle upload(
            Path f,
            CheckpointedStateScope scope,
            CheckpointStreamFactory factory,
            org.apache.flink.core.fs.CloseableRegistry registry)
            throws IOException {
        CheckpointStateOutputStream out = factory.createCheckpointStateOutputStream(scope);
        registry.registerCloseable(out);
        try {
            Files.copy(f, out);
        } catch (IOException e) {
            if (registry.unregisterCloseable(out)) {
                out.close();
            }
            throw new IOException("sfs-flink: cannot upload " + f + ": " + e.getMessage(), e);
        }
        if (!registry.unregisterCloseable(out)) {
            throw new IOException("sfs-flink: the checkpoint was cancelled while uploading " + f);
        }
        return out.closeAndGetHandle();
    }

    private StreamStateHandle writeMeta(
            Resources res, CheckpointStreamFactory factory, org.apache.flink.core.fs.CloseableRegistry registry)
            throws IOException {
        CheckpointStateOutputStream out = factory.createCheckpointStateOutputStream(CheckpointedStateScope.EXCLUSIVE);
        registry.registerCloseable(out);
        SfsSnapshotFormat.write(
                new DataOutputViewStreamWrapper(out),
                new KeyedBackendSerializationProxy<>(backend.getKeySerializer(), res.metas, false),
                res.ids);
        if (!registry.unregisterCloseable(out)) {
            throw new IOException("sfs-flink: the checkpoint was cancelled while writing its meta file");
        }
        return out.closeAndGetHandle();
    }

    /** sfs's TTL expiry at the front of a stored value (common/ttl.h: a native uint64). */
    static long expiryOf(byte[] v) {
        return java.nio.ByteBuffer.wrap(v, 0, 8).order(java.nio.ByteOrder.nativeOrder()).getLong();
    }

    /** What identifies a checkpoint across the JobManager's round trip: its meta file. */
    static String handleId(IncrementalRemoteKeyedStateHandle h) {
        return h.getMetaDataStateHandle().getStreamStateHandleID().getKeyString();
    }

    /** Polls the stage in short native waits, so a dispose is never held up for long. */
    static String awaitStaged(SfsKeyedStateBackend<?> backend, long id) throws IOException {
        long deadline = System.nanoTime() + backend.settings.stageTimeoutMs * 1_000_000L;
        while (true) {
            synchronized (backend.nativeLock) {
                if (backend.nativeClosed()) {
                    throw new IOException("sfs-flink: the backend was closed during barrier " + id);
                }
                try {
                    return SfsNative.staged(backend.ctxHandle, id, 50);
                } catch (SfsException e) {
                    if (!e.getMessage().contains("not staged after") || System.nanoTime() > deadline) {
                        throw new IOException("sfs-flink: barrier " + id + ": " + e.getMessage(), e);
                    }
                }
            }
            Thread.yield();
        }
    }
}
