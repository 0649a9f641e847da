package io.sfs.flink;

import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.memory.MemoryManager;
import org.apache.flink.runtime.state.InternalKeyContextImpl;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo;
import org.apache.flink.runtime.state.StateBackend.KeyedStateBackendParameters;
import org.apache.flink.runtime.state.StreamCompressionDecorator;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.runtime.state.metrics.LatencyTrackingStateConfig;
import org.apache.flink.runtime.state.metrics.SizeTrackingStateConfig;
import org.apache.flink.util.StateMigrationException;

import io.sfs.flink.jni.SfsIo;
import io.sfs.flink.jni.SfsNative;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Opens a subtask's sfs worker and restores it: a slot of the host group, the subtask's own
 * key-group range and max parallelism (any up to 32768), Flink's key groups per call; then every
 * entry of the handles Flink assigned (already clipped to the range by their key-group offsets)
 * written back through the worker, checked against the snapshot's serializers.
 */
final class SfsKeyedStateBackendBuilder<K> {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(SfsKeyedStateBackendBuilder.class);
    private final KeyedStateBackendParameters<K> p;
    private final SfsHostGroup group;
    private final SfsStateBackend.Settings settings;
    private final StreamCompressionDecorator compression;
    private final LatencyTrackingStateConfig latency;
    private final SizeTrackingStateConfig size;

    SfsKeyedStateBackendBuilder(
            KeyedStateBackendParameters<K> p,
            SfsHostGroup group,
            SfsStateBackend.Settings settings,
            StreamCompressionDecorator compression,
            LatencyTrackingStateConfig latency,
            SizeTrackingStateConfig size) {
        this.p = p;
        this.group = group;
        this.settings = settings;
        this.compression = compression;
        this.latency = latency;
        this.size = size;
    }

    /**
     * A subtask's memory: its write buffers and value cache, and how to give its share back.
     *
     * <p>The state backend's managed memory is a slot-wide budget: Flink gives every stateful
     * operator of a slot the same fraction (a SLOT-scoped use case, as RocksDB's one shared cache
     * per slot assumes), so a subtask that reserved its fraction for itself would count the slot's
     * budget once per operator (measured: Nexmark q7's join then found 1451229184 of the 1468006400
     * bytes it asked, and the planner's own operators none). sfs takes the budget once per slot
     * from Flink's memory manager, as RocksDB does ({@code getSharedMemoryResourceForManagedMemory}:
     * reference-counted, released with the slot's last backend), and deals it out: each subtask
     * takes half of what the slot has not dealt yet (at least 8 MiB; the first takes 1/2, the next
     * 1/4, ...), and gives it back at dispose. Half to the four write buffers, half to the value
     * cache. Without managed memory (a test harness) the configured buffer-mb and cache-mb hold.
     */
    static final class Memory {
        long share, bufferBytes, cacheBytes;
        Runnable release = () -> {};
    }

    /** Per slot (its memory manager): the budget not dealt out yet. */
    private static final java.util.Map<MemoryManager, long[]> UNDEALT = new java.util.WeakHashMap<>();

    private static final String SHARED_RESOURCE = "sfs-state";

    /** What Flink's shared resource holds: nothing but its size (sfs's memory is shared memory). */
    private static final class SlotBudget implements AutoCloseable {
        SlotBudget(long size) {}

        @Override
        public void close() {}
    }

    private Memory memory() throws IOException {
        Memory m = new Memory();
        m.bufferBytes = (long) settings.bufferMb << 20;
        m.cacheBytes = (long) settings.cacheMb << 20;
        double fraction = p.getManagedMemoryFraction();
        MemoryManager mm = p.getEnv().getMemoryManager();
        if (fraction <= 0 || mm == null) {
            return m;
        }
        org.apache.flink.runtime.memory.OpaqueMemoryResource<SlotBudget> slot;
        try {
            slot = mm.getSharedMemoryResourceForManagedMemory(SHARED_RESOURCE, SlotBudget::new, fraction);
        } catch (Exception e) {
            throw new IOException("sfs-flink: cannot reserve the slot's managed memory for state", e);
        }
        long share;
        synchronized (UNDEALT) {
            long[] left = UNDEALT.computeIfAbsent(mm, k -> new long[] {slot.getSize()});
            share = left[0] / 2 >= 8L << 20 ? left[0] / 2 : 0;
            left[0] -= share;
        }
        if (share == 0) {
            closeQuietly(slot);
            return m;
        }
        m.share = share;
        m.bufferBytes = Math.min(share / 8, 1L << 30);
        m.cacheBytes = Math.min(share / 2, 4L << 30);
        m.release = () -> {
            synchronized (UNDEALT) {
                long[] left = UNDEALT.get(mm);
                if (left != null) {
                    left[0] += share;
                }
            }
            closeQuietly(slot);
        };
        return m;
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            LOG.warn("sfs-flink: releasing the slot's managed memory", e);
        }
    }

    SfsKeyedStateBackend<K> build() throws IOException {
        KeyGroupRange range = p.getKeyGroupRange();
        String who = p.getOperatorIdentifier() + " key groups " + range;
        final Memory mem = memory();
        boolean local = p.getEnv().getTaskStateManager().createLocalRecoveryConfig().isLocalRecoveryEnabled();
        String parkKey = p.getNumberOfKeyGroups() + "|" + range;
        SfsHostGroup.Parked back = local ? inPlace(parkKey) : null;
        int slot;
        long ctx = 0;
        try {
            if (back != null) {
                // Flink's local recovery: the slot that wrote this checkpoint goes back to it
                String why = SfsNative.restorePinned(
                        back.ctx, back.barrierBase + (back.checkpointId << SfsKeyedStateBackend.PROBES_SHIFT), 60_000);
                if (why == null) {
                    ctx = back.ctx;
                } else {
                    LOG.info("sfs-flink: {}: no restore in place from checkpoint {} ({}); from files",
                            who, back.checkpointId, why);
                    SfsNative.close(back.ctx); // its next subtask empties it
                    group.release(back.slot);
                    back = null;
                }
            }
            if (back != null) {
                slot = back.slot;
            } else {
                // a slot nobody holds, emptied in place if a subtask used it before
                long[] claim = group.claimSlot(who, i -> SfsNative.open(group.job, i, p.getNumberOfKeyGroups(),
                        range.getStartKeyGroup(), range.getEndKeyGroup(), mem.bufferBytes, mem.cacheBytes, true));
                slot = (int) claim[0];
                ctx = claim[1];
            }
        } catch (RuntimeException e) {
            mem.release.run();
            throw e;
        }
        MetricGroup g = p.getMetricGroup().addGroup("sfs");
        g.gauge("stateMemoryBytes", () -> 4 * mem.bufferBytes + mem.cacheBytes);
        g.gauge("managedMemoryBytes", () -> mem.share);
        g.gauge("slot", () -> (long) slot);
        SfsKeyedStateBackend<K> b =
                new SfsKeyedStateBackend<>(
                        p.getKvStateRegistry(),
                        p.getKeySerializer(),
                        p.getEnv().getUserCodeClassLoader().asClassLoader(),
                        p.getEnv().getExecutionConfig(),
                        p.getTtlTimeProvider(),
                        latency,
                        size,
                        // the backend's own: Flink closes the parameters' one once restored
                        new org.apache.flink.core.fs.CloseableRegistry(),
                        compression,
                        new InternalKeyContextImpl<>(range, p.getNumberOfKeyGroups()),
                        group,
                        settings,
                        slot,
                        ctx,
                        mem.release,
                        local,
                        parkKey);
        try {
            if (back != null) {
                // the store is the checkpoint's already: only the states' meta infos
                for (int i = 0; i < back.metas.size(); i++) {
                    StateMetaInfoSnapshot m = back.metas.get(i);
                    b.restoredMeta.putIfAbsent(m.getName(), m);
                    RegisteredKeyValueStateBackendMetaInfo<?, ?> meta = new RegisteredKeyValueStateBackendMetaInfo<>(m);
                    b.register(m.getName(), meta.getStateType(), meta, back.ids.get(i).ttlMs);
                }
                b.barriersAsBefore(back.barrierBase, back.lastBarrier);
                b.pinnedAlready(new SfsKeyedStateBackend.Written(
                        back.checkpointId, back.handleId, back.metas, back.ids));
                SfsHostGroup.LOCAL_RESTORES.incrementAndGet();
                LOG.info("sfs-flink: {}: restored in place from checkpoint {} (slot {}): no file read",
                        who, back.checkpointId, slot);
            } else {
                b.barriersAbove(SfsNative.lastBarrier(ctx));
                int handles = 0;
                for (KeyedStateHandle h : p.getStateHandles()) {
                    handles += h != null ? 1 : 0;
                }
                int n = 0;
                for (KeyedStateHandle h : p.getStateHandles()) {
                    if (h != null) {
                        restore(b, h, handles == 1, who, slot);
                        n++;
                    }
                }
                if (n > 0) {
                    LOG.info("sfs-flink: {}: restored from {} checkpoint file set(s) (slot {})", who, n, slot);
                }
            }
        } catch (Exception e) {
            b.dispose();
            throw e instanceof IOException ? (IOException) e : new IOException(e);
        }
        return b;
    }

    /**
     * The parked slot that wrote the one handle Flink restores this subtask from (same operator,
     * same range, exactly that checkpoint file), or null: a rescale, another checkpoint, another
     * TaskManager, or nothing parked.
     */
    private SfsHostGroup.Parked inPlace(String parkKey) {
        KeyedStateHandle only = null;
        int n = 0;
        for (KeyedStateHandle h : p.getStateHandles()) {
            if (h != null) {
                only = h;
                n++;
            }
        }
        if (n != 1 || !(only instanceof IncrementalRemoteKeyedStateHandle)
                || !only.getKeyGroupRange().equals(p.getKeyGroupRange())) {
            return null;
        }
        return group.unpark(SfsSnapshotStrategy.handleId((IncrementalRemoteKeyedStateHandle) only), parkKey);
    }

    /**
     * One checkpoint file set into this subtask's empty store. Its files are downloaded as they
     * were staged; then, when this subtask is exactly the one that wrote them ({@code only}: the
     * one handle it restores; same key-group range; every state registered again under the id it
     * was written with), the compactor adopts them as the store — linked, no entry read: O(files)
     * after the download. Otherwise (a rescale, a renumbered state, a target that cannot adopt)
     * every entry in this subtask's key groups is read and written back: O(entries), each a JNI
     * crossing both ways, and the next barrier flushes them all again.
     */
    private void restore(SfsKeyedStateBackend<K> b, KeyedStateHandle h, boolean only, String who, int slot)
            throws Exception {
        if (!(h instanceof IncrementalRemoteKeyedStateHandle)) {
            throw new StateMigrationException(
                    "sfs-flink restores its own checkpoints and native savepoints; "
                            + h.getClass().getSimpleName()
                            + " is another backend's (a switch of backends through Flink's canonical"
                            + " savepoint format is not supported yet)");
        }
        IncrementalRemoteKeyedStateHandle ih = (IncrementalRemoteKeyedStateHandle) h;
        String what = "checkpoint " + ih.getCheckpointId() + " meta file " + ih.getMetaDataStateHandle();
        ClassLoader cl = p.getEnv().getUserCodeClassLoader().asClassLoader();
        KeyedBackendSerializationProxy<K> proxy = new KeyedBackendSerializationProxy<>(cl);
        List<SfsSnapshotFormat.StateIds> old = new ArrayList<>();
        try (FSDataInputStream in = ih.getMetaDataStateHandle().openInputStream()) {
            SfsSnapshotFormat.read(new DataInputViewStreamWrapper(in), proxy, old, what);
        }
        if (proxy.getKeySerializerSnapshot() != null
                && proxy.getKeySerializerSnapshot()
                        .resolveSchemaCompatibility(p.getKeySerializer().snapshotConfiguration())
                        .isIncompatible()) {
            throw new StateMigrationException(
                    "The new key serializer (" + p.getKeySerializer() + ") is incompatible with the checkpoint's");
        }
        // each state of the checkpoint: registered here; its entries carry the old id
        SfsKeyedStateBackend.Registered[] byOldId = new SfsKeyedStateBackend.Registered[256];
        long[] triples = new long[3 * old.size()];
        List<StateMetaInfoSnapshot> metas = proxy.getStateMetaInfoSnapshots();
        for (int i = 0; i < metas.size(); i++) {
            StateMetaInfoSnapshot m = metas.get(i);
            if (m.getBackendStateType() != StateMetaInfoSnapshot.BackendStateType.KEY_VALUE) {
                throw new IOException("sfs-flink: " + what + ": state " + m.getName() + " is not keyed state");
            }
            b.restoredMeta.putIfAbsent(m.getName(), m);
            RegisteredKeyValueStateBackendMetaInfo<?, ?> meta = new RegisteredKeyValueStateBackendMetaInfo<>(m);
            SfsSnapshotFormat.StateIds o = old.get(i);
            byOldId[o.id] = b.register(m.getName(), meta.getStateType(), meta, o.ttlMs);
            triples[3 * i] = o.id;
            triples[3 * i + 1] = o.kind;
            triples[3 * i + 2] = o.ttlMs;
        }
        // the checkpoint's files, as they were staged, read with sfs's own reader
        Path dir = Files.createTempDirectory(group.dataDir, "restore-");
        try {
            Files.createDirectories(dir.resolve(SfsNative.SHARED));
            List<IncrementalKeyedStateHandle.HandleAndLocalPath> all = new ArrayList<>(ih.getSharedState());
            all.addAll(ih.getPrivateState());
            for (IncrementalKeyedStateHandle.HandleAndLocalPath f : all) {
                Path to = dir.resolve(f.getLocalPath()).normalize();
                if (!to.startsWith(dir) || f.getLocalPath().contains("..")) {
                    throw new IOException("sfs-flink: " + what + ": file " + f.getLocalPath() + " leaves its directory");
                }
                try (FSDataInputStream in = f.getHandle().openInputStream()) {
                    Files.copy(in, to);
                } catch (IOException e) {
                    throw new IOException("sfs-flink: " + what + ": cannot read " + f.getLocalPath()
                            + " (" + f.getHandle() + "): " + e.getMessage(), e);
                }
            }
            boolean sameIds = true;
            for (SfsSnapshotFormat.StateIds o : old) {
                sameIds &= byOldId[o.id].sfsId == o.id;
            }
            String why = !only ? "more than one file set (a rescale)"
                    : !ih.getKeyGroupRange().equals(p.getKeyGroupRange()) ? "key groups " + ih.getKeyGroupRange()
                            + " written, " + p.getKeyGroupRange() + " restored (a rescale)"
                    : !sameIds ? "a state registered under another id"
                    : SfsNative.adopt(b.ctxHandle, dir.toString(), settings.stageTimeoutMs);
            if (why == null) {
                SfsHostGroup.ADOPTED_RESTORES.incrementAndGet();
                LOG.info("sfs-flink: {}: restored from checkpoint {} by adopting its {} files (slot {})",
                        who, ih.getCheckpointId(), all.size(), slot);
            } else {
                SfsHostGroup.WRITTEN_RESTORES.incrementAndGet();
                LOG.info("sfs-flink: {}: restoring checkpoint {} by writing its entries back: {}",
                        who, ih.getCheckpointId(), why);
                writeBack(b, dir, triples, byOldId, what);
            }
        } finally {
            org.apache.flink.util.FileUtils.deleteDirectoryQuietly(dir.toFile());
        }
    }

    /** Every entry of the files in @dir that falls in this subtask's key groups, written back. */
    private void writeBack(
            SfsKeyedStateBackend<K> b,
            Path dir,
            long[] triples,
            SfsKeyedStateBackend.Registered[] byOldId,
            String what)
            throws IOException {
        SfsIo io = b.io();
        long h = b.ctxHandle;
        KeyGroupRange range = p.getKeyGroupRange();
        long now = System.currentTimeMillis();
        IOException[] failed = new IOException[1];
        try {
            SfsNative.scan(h, dir.toString(), triples, (state, kg, ns, key, ukey, value) -> {
                SfsKeyedStateBackend.Registered r = state < 256 ? byOldId[state] : null;
                if (failed[0] != null || !range.contains(kg)) {
                    return; // another subtask's key group (a rescale)
                }
                if (r == null) {
                    failed[0] = new IOException("sfs-flink: " + what + ": an entry of unknown state " + state);
                    return;
                }
                byte[] v = value == null ? new byte[0] : value;
                if (r.ttlMs > 0) {
                    // sfs's expiry in front: an entry sfs expired is one Flink expired too
                    if (v.length < 8 || SfsSnapshotStrategy.expiryOf(v) <= now) {
                        return;
                    }
                    v = java.util.Arrays.copyOfRange(v, 8, v.length);
                }
                int klen = key.length;
                io.put(0, key, klen);
                if (r.kind == SfsNative.KIND_VALUE) {
                    io.put(klen, v, v.length);
                    SfsNative.valuePut(h, r.sfsId, kg, ns, klen, v.length);
                } else if (r.kind == SfsNative.KIND_LIST) {
                    io.ensure(klen + 4 + v.length, klen);
                    io.putNativeInt(klen, v.length);
                    io.put(klen + 4, v, v.length);
                    SfsNative.listAppend(h, r.sfsId, kg, ns, klen, 4 + v.length);
                } else {
                    io.put(klen, ukey, ukey.length);
                    io.put(klen + ukey.length, v, v.length);
                    SfsNative.mapPut(h, r.sfsId, kg, ns, klen, ukey.length, v.length);
                }
            });
        } catch (RuntimeException e) {
            throw new IOException("sfs-flink: " + what + ": " + e.getMessage(), e);
        }
        if (failed[0] != null) {
            throw failed[0];
        }
    }
}
