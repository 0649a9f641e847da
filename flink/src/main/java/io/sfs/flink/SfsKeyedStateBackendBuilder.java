package io.sfs.flink;

import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.memory.MemoryManager;
import org.apache.flink.runtime.memory.MemoryReservationException;
import org.apache.flink.runtime.state.InternalKeyContextImpl;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
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
     * The subtask's share of the slot's managed memory (Flink's fraction for this operator's
     * state backend), reserved from Flink's memory manager so that Flink counts it: half goes
     * to the 4 write buffers, half to the value cache, each at least 1 MiB. Without managed
     * memory (a test harness) the configured buffer-mb and cache-mb hold. The reservation is
     * returned at dispose.
     */
    static final class Memory {
        long budget, bufferBytes, cacheBytes;
    }

    private Memory memory() {
        Memory m = new Memory();
        double fraction = p.getManagedMemoryFraction();
        MemoryManager mm = p.getEnv().getMemoryManager();
        long budget = fraction > 0 && mm != null ? mm.computeMemorySize(fraction) : 0;
        if (budget >= 8L << 20) {
            m.budget = budget;
            m.bufferBytes = Math.min(budget / 8, 1L << 30);
            m.cacheBytes = Math.min(budget / 2, 4L << 30);
        } else {
            m.bufferBytes = (long) group.bufferMb << 20;
            m.cacheBytes = (long) group.cacheMb << 20;
        }
        return m;
    }

    SfsKeyedStateBackend<K> build() throws IOException {
        KeyGroupRange range = p.getKeyGroupRange();
        String who = p.getOperatorIdentifier() + " key groups " + range;
        Memory mem = memory();
        MemoryManager mm = p.getEnv().getMemoryManager();
        Object owner = new Object();
        if (mem.budget > 0) {
            try {
                mm.reserveMemory(owner, mem.budget);
            } catch (MemoryReservationException e) {
                throw new IOException("sfs-flink: " + who + ": cannot reserve " + mem.budget
                        + " bytes of managed memory for its state", e);
            }
        }
        boolean local = p.getEnv().getTaskStateManager().createLocalRecoveryConfig().isLocalRecoveryEnabled();
        String parkKey = p.getNumberOfKeyGroups() + "|" + range;
        SfsHostGroup.Parked back = local ? inPlace(parkKey) : null;
        int slot;
        long ctx = 0;
        try {
            if (back != null) {
                // Flink's local recovery: the slot that wrote this checkpoint goes back to it
                ctx = SfsNative.open(group.job, back.slot, p.getNumberOfKeyGroups(),
                        range.getStartKeyGroup(), range.getEndKeyGroup(), mem.bufferBytes, mem.cacheBytes);
                String why = SfsNative.restorePinned(
                        ctx, SfsKeyedStateBackend.barrierOf(back.checkpointId), 60_000);
                if (why != null) {
                    LOG.info("sfs-flink: {}: no restore in place from checkpoint {} ({}); from files",
                            who, back.checkpointId, why);
                    SfsNative.close(ctx); // the slot is given up: its state is undefined now
                    ctx = 0;
                    back = null;
                }
            }
            if (back != null) {
                slot = back.slot;
            } else {
                slot = group.claimSlot(who);
                ctx = SfsNative.open(
                        group.job,
                        slot,
                        p.getNumberOfKeyGroups(),
                        range.getStartKeyGroup(),
                        range.getEndKeyGroup(),
                        mem.bufferBytes,
                        mem.cacheBytes);
            }
        } catch (RuntimeException e) {
            if (mem.budget > 0) {
                mm.releaseMemory(owner, mem.budget);
            }
            throw e;
        }
        MetricGroup g = p.getMetricGroup().addGroup("sfs");
        g.gauge("stateMemoryBytes", () -> 4 * mem.bufferBytes + mem.cacheBytes);
        g.gauge("managedMemoryBytes", () -> mem.budget);
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
                        mem.budget > 0 ? () -> mm.releaseMemory(owner, mem.budget) : () -> {},
                        local,
                        parkKey);
        try {
            if (back != null) {
                // the store is the checkpoint's already: only the states' meta infos
                for (int i = 0; i < back.metas.size(); i++) {
                    StateMetaInfoSnapshot m = back.metas.get(i);
                    b.restoredMeta.putIfAbsent(m.getName(), m);
                    RegisteredKeyValueStateBackendMetaInfo<?, ?> meta = new RegisteredKeyValueStateBackendMetaInfo<>(m);
                    b.register(m.getName(), meta.getStateType(), meta, back.ttls.get(i));
                }
                b.sealed(back.lastBarrier);
                SfsHostGroup.LOCAL_RESTORES.incrementAndGet();
                LOG.info("sfs-flink: {}: restored in place from checkpoint {} (slot {}): no file read",
                        who, back.checkpointId, slot);
            } else {
                for (KeyedStateHandle h : p.getStateHandles()) {
                    if (h != null) {
                        restore(b, h);
                    }
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
        if (n != 1 || !(only instanceof KeyGroupsStateHandle)
                || !only.getKeyGroupRange().equals(p.getKeyGroupRange())) {
            return null;
        }
        return group.unpark(SfsSnapshotStrategy.handleId((KeyGroupsStateHandle) only), parkKey);
    }

    private void restore(SfsKeyedStateBackend<K> b, KeyedStateHandle h) throws Exception {
        if (!(h instanceof KeyGroupsStateHandle)) {
            throw new StateMigrationException(
                    "sfs-flink restores its own checkpoints; "
                            + h.getClass().getSimpleName()
                            + " is another backend's (switch backends through a canonical savepoint"
                            + " taken on that backend is not supported yet)");
        }
        KeyGroupsStateHandle kh = (KeyGroupsStateHandle) h;
        String what = "checkpoint file " + kh.getDelegateStateHandle();
        ClassLoader cl = p.getEnv().getUserCodeClassLoader().asClassLoader();
        try (FSDataInputStream in = kh.openInputStream()) {
            DataInputViewStreamWrapper view = new DataInputViewStreamWrapper(in);
            KeyedBackendSerializationProxy<K> proxy = new KeyedBackendSerializationProxy<>(cl);
            List<Long> ttls = new ArrayList<>();
            SfsSnapshotFormat.readHeader(view, proxy, ttls, what);
            if (proxy.getKeySerializerSnapshot() != null
                    && proxy.getKeySerializerSnapshot()
                            .resolveSchemaCompatibility(
                                    p.getKeySerializer().snapshotConfiguration())
                            .isIncompatible()) {
                throw new StateMigrationException(
                        "The new key serializer (" + p.getKeySerializer() + ") is incompatible with the checkpoint's");
            }
            // each state of the snapshot: registered now, with the snapshot's meta info
            List<Tuple2<Integer, Integer>> ids = new ArrayList<>(); // sfs id, kind
            int index = 0;
            for (StateMetaInfoSnapshot m : proxy.getStateMetaInfoSnapshots()) {
                if (m.getBackendStateType() != StateMetaInfoSnapshot.BackendStateType.KEY_VALUE) {
                    throw new IOException("sfs-flink: " + what + ": state " + m.getName() + " is not keyed state");
                }
                b.restoredMeta.putIfAbsent(m.getName(), m);
                RegisteredKeyValueStateBackendMetaInfo<?, ?> meta = new RegisteredKeyValueStateBackendMetaInfo<>(m);
                long ttl = ttls.get(index++);
                SfsKeyedStateBackend.Registered r = b.register(m.getName(), meta.getStateType(), meta, ttl);
                ids.add(Tuple2.of(r.sfsId, r.kind));
            }
            for (Tuple2<Integer, Long> kgOff : kh.getGroupRangeOffsets()) {
                in.seek(kgOff.f1);
                readKeyGroup(b, view, kgOff.f0, ids, what);
            }
        }
    }

    private void readKeyGroup(
            SfsKeyedStateBackend<K> b,
            DataInputViewStreamWrapper in,
            int kg,
            List<Tuple2<Integer, Integer>> ids,
            String what)
            throws IOException {
        SfsIo io = b.io();
        long h = b.ctxHandle;
        while (true) {
            short st = in.readShort();
            if (st == SfsSnapshotFormat.END_OF_KEY_GROUP) {
                return;
            }
            if (st < 0 || st >= ids.size()) {
                throw new IOException("sfs-flink: " + what + ": key group " + kg + ": state index " + st + " out of range");
            }
            int klen = in.readInt();
            if (klen < 0 || klen > 64 * 1024) {
                throw new IOException("sfs-flink: " + what + ": key group " + kg + ": key of " + klen + " bytes");
            }
            io.ensure(klen, 0);
            byte[] key = new byte[klen];
            in.readFully(key);
            io.put(0, key, klen);
            int nsLen = in.readInt();
            int ulen = in.readInt();
            byte[] ukey = null;
            if (ulen >= 0) {
                ukey = new byte[ulen];
                in.readFully(ukey);
            }
            int vlen = in.readInt();
            if (vlen < 0) {
                throw new IOException("sfs-flink: " + what + ": key group " + kg + ": value of " + vlen + " bytes");
            }
            byte[] val = new byte[vlen];
            in.readFully(val);
            int id = ids.get(st).f0;
            int kind = ids.get(st).f1;
            if (kind == SfsNative.KIND_VALUE) {
                io.put(klen, val, vlen);
                SfsNative.valuePut(h, id, kg, nsLen, klen, vlen);
            } else if (kind == SfsNative.KIND_LIST) {
                io.ensure(klen + 4 + vlen, klen);
                io.putNativeInt(klen, vlen);
                io.put(klen + 4, val, vlen);
                SfsNative.listAppend(h, id, kg, nsLen, klen, 4 + vlen);
            } else {
                if (ukey == null) {
                    throw new IOException("sfs-flink: " + what + ": a map entry without a user key");
                }
                io.put(klen, ukey, ukey.length);
                io.put(klen + ukey.length, val, vlen);
                SfsNative.mapPut(h, id, kg, nsLen, klen, ukey.length, vlen);
            }
        }
    }
}
