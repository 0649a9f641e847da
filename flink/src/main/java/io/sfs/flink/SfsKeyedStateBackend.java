package io.sfs.flink;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.state.AggregatingStateDescriptor;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSchemaCompatibility;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.checkpoint.SnapshotType;
import org.apache.flink.runtime.query.TaskKvStateRegistry;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.CheckpointStreamFactory;
import org.apache.flink.runtime.state.InternalKeyContext;
import org.apache.flink.runtime.state.KeyGroupedInternalPriorityQueue;
import org.apache.flink.runtime.state.Keyed;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.PriorityComparable;
import org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo;
import org.apache.flink.runtime.state.SavepointResources;
import org.apache.flink.runtime.state.SnapshotExecutionType;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.SnapshotStrategyRunner;
import org.apache.flink.runtime.state.StateSnapshotTransformer.StateSnapshotTransformFactory;
import org.apache.flink.runtime.state.StreamCompressionDecorator;
import org.apache.flink.runtime.state.heap.HeapPriorityQueueElement;
import org.apache.flink.runtime.state.heap.HeapPriorityQueueSetFactory;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.runtime.state.metrics.LatencyTrackingStateConfig;
import org.apache.flink.runtime.state.metrics.SizeTrackingStateConfig;
import org.apache.flink.runtime.state.ttl.TtlTimeProvider;
import org.apache.flink.util.StateMigrationException;

import io.sfs.flink.jni.SfsIo;
import io.sfs.flink.jni.SfsNative;
import io.sfs.flink.state.AbstractSfsState;
import io.sfs.flink.state.SfsAggregatingState;
import io.sfs.flink.state.SfsListState;
import io.sfs.flink.state.SfsMapState;
import io.sfs.flink.state.SfsReducingState;
import io.sfs.flink.state.SfsStateContext;
import io.sfs.flink.state.SfsValueState;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.RunnableFuture;
import java.util.stream.Stream;

/**
 * One subtask's keyed state in sfs: an sfs worker (a slot of the TaskManager's host group) with
 * the subtask's key-group range, Flink's key groups and Flink's serialized bytes.
 *
 * <p>Threads: every state call, the checkpoint's synchronous phase and {@link #dispose} run on
 * the task thread; the asynchronous phase ({@link SfsSnapshotStrategy}) runs on Flink's
 * snapshot thread and reaches the native context only under {@link #nativeLock}, which dispose
 * also takes, so a context is never closed under a running snapshot.
 *
 * <p>Who owns which files: the group's compactor owns the store and the stage directories it
 * writes; the snapshot thread removes a stage directory once it has written it to Flink's
 * checkpoint storage; Flink owns what it wrote there (its handles, its registry).
 */
public class SfsKeyedStateBackend<K> extends AbstractKeyedStateBackend<K>
        implements SfsStateContext<K> {

    /** A registered state: Flink's meta info, sfs's id and kind, the state object. */
    static final class Registered {
        RegisteredKeyValueStateBackendMetaInfo<?, ?> meta;
        final int sfsId;
        final int kind;
        long ttlMs;
        AbstractSfsState<?, ?, ?> state;

        Registered(RegisteredKeyValueStateBackendMetaInfo<?, ?> meta, int sfsId, int kind, long ttlMs) {
            this.meta = meta;
            this.sfsId = sfsId;
            this.kind = kind;
            this.ttlMs = ttlMs;
        }
    }

    final long ctxHandle;
    final int slot;
    final SfsHostGroup group;
    final SfsStateBackend.Settings settings;
    final Object nativeLock = new Object();
    private boolean closedNative;
    private final SfsIo io;
    private final HeapPriorityQueueSetFactory pqFactory;
    final Map<String, Registered> states = new LinkedHashMap<>();
    /** States of the restored snapshots, by name, not yet registered by the operator. */
    final Map<String, StateMetaInfoSnapshot> restoredMeta = new LinkedHashMap<>();
    private final SfsSnapshotStrategy<K> strategy;
    private final Runnable releaseMemory;
    /** This backend's identity in its checkpoints' handles. */
    final java.util.UUID backendId = java.util.UUID.randomUUID();

    /** Local recovery (state.backend.local-recovery): pin completed checkpoints, park the slot. */
    final boolean localRecovery;
    /** This subtask's max parallelism and key-group range, as parked slots record them. */
    final String parkKey;

    /** A checkpoint this backend wrote: its handle's physical id and its states' meta infos. */
    static final class Written {
        final long id;
        final String handleId;
        final List<StateMetaInfoSnapshot> metas;
        final List<SfsSnapshotFormat.StateIds> ids;

        Written(long id, String handleId, List<StateMetaInfoSnapshot> metas, List<SfsSnapshotFormat.StateIds> ids) {
            this.ids = ids;
            this.id = id;
            this.handleId = handleId;
            this.metas = metas;
        }
    }

    /** Written by the snapshot thread, read by the task thread at notifyCheckpointComplete. */
    final java.util.concurrent.ConcurrentSkipListMap<Long, Written> written =
            new java.util.concurrent.ConcurrentSkipListMap<>();
    /** Task thread: the last checkpoint pinned. */
    private Written pinned;

    /**
     * A slot taken back in place: its compactor's pin is still @w's, so if this attempt ends
     * before pinning another checkpoint, the slot is parked again for it.
     */
    void pinnedAlready(Written w) {
        pinned = w;
    }

    // the current key's serialized bytes (set with the key), and the last namespace's
    private byte[] keyBytes = new byte[64];
    private int keyLen;
    private Object lastNs;
    private TypeSerializer<?> lastNsSer;
    private byte[] nsBytes = new byte[32];
    private int nsLen;
    private final org.apache.flink.core.memory.DataOutputSerializer keyOut =
            new org.apache.flink.core.memory.DataOutputSerializer(64);

    SfsKeyedStateBackend(
            TaskKvStateRegistry kvStateRegistry,
            TypeSerializer<K> keySerializer,
            ClassLoader userCodeClassLoader,
            ExecutionConfig executionConfig,
            TtlTimeProvider ttlTimeProvider,
            LatencyTrackingStateConfig latencyTrackingStateConfig,
            SizeTrackingStateConfig sizeTrackingStateConfig,
            CloseableRegistry cancelStreamRegistry,
            StreamCompressionDecorator compression,
            InternalKeyContext<K> keyContext,
            SfsHostGroup group,
            SfsStateBackend.Settings settings,
            int slot,
            long ctxHandle,
            Runnable releaseMemory,
            boolean localRecovery,
            String parkKey) {
        super(
                kvStateRegistry,
                keySerializer,
                userCodeClassLoader,
                executionConfig,
                ttlTimeProvider,
                latencyTrackingStateConfig,
                sizeTrackingStateConfig,
                cancelStreamRegistry,
                compression,
                keyContext);
        this.group = group;
        this.settings = settings;
        this.slot = slot;
        this.ctxHandle = ctxHandle;
        this.releaseMemory = releaseMemory;
        this.localRecovery = localRecovery;
        this.parkKey = parkKey;
        this.io = new SfsIo(ctxHandle, 64 * 1024);
        this.pqFactory =
                new HeapPriorityQueueSetFactory(
                        keyContext.getKeyGroupRange(), keyContext.getNumberOfKeyGroups(), 128);
        this.strategy = new SfsSnapshotStrategy<>(this);
    }

    // ---- the current key ----------------------------------------------------------------

    @Override
    public void setCurrentKey(K newKey) {
        super.setCurrentKey(newKey);
        serializeKey(newKey);
    }

    @Override
    public void setCurrentKeyAndKeyGroup(K newKey, int newKeyGroupIndex) {
        super.setCurrentKeyAndKeyGroup(newKey, newKeyGroupIndex);
        serializeKey(newKey);
    }

    private void serializeKey(K key) {
        keyOut.clear();
        try {
            keySerializer.serialize(key, keyOut);
        } catch (IOException e) {
            throw new RuntimeException("sfs-flink: cannot serialize key " + key, e);
        }
        keyLen = keyOut.length();
        if (keyBytes.length < keyLen) {
            keyBytes = new byte[Math.max(keyLen, keyBytes.length * 2)];
        }
        System.arraycopy(keyOut.getSharedBuffer(), 0, keyBytes, 0, keyLen);
    }

    @Override
    public long handle() {
        return ctxHandle;
    }

    @Override
    public SfsIo io() {
        return io;
    }

    @Override
    public TypeSerializer<K> keySerializer() {
        return keySerializer;
    }

    @Override
    public int keyGroup() {
        return keyContext.getCurrentKeyGroupIndex();
    }

    @Override
    public long lastNamespaceLength() {
        return nsLen;
    }

    /**
     * The current key then namespace @ns at 0 of the io buffer. The namespace's bytes are kept
     * while the same namespace object comes again (VoidNamespace, a window reused across keys).
     */
    @Override
    public <N> int writeKey(N ns, TypeSerializer<N> ser) {
        if (ns != lastNs || ser != lastNsSer) {
            SfsIo.Out out = io.out.at(keyLen);
            try {
                ser.serialize(ns, out);
            } catch (IOException e) {
                throw new RuntimeException("sfs-flink: cannot serialize namespace " + ns, e);
            }
            nsLen = out.position() - keyLen;
            if (nsBytes.length < nsLen) {
                nsBytes = new byte[Math.max(nsLen, nsBytes.length * 2)];
            }
            io.buffer().get(keyLen, nsBytes, 0, nsLen);
            lastNs = ns;
            lastNsSer = ser;
        }
        io.put(0, keyBytes, keyLen);
        io.put(keyLen, nsBytes, nsLen);
        return keyLen + nsLen;
    }

    // ---- states -------------------------------------------------------------------------

    /**
     * sfs state names are segment-wide and at most 47 bytes: kind, whether sfs keeps a TTL for
     * it (its entries' format differs), then the Flink name.
     */
    static String sfsName(String name, int kind, boolean ttl) {
        String n = (kind == SfsNative.KIND_MAP ? "m" : kind == SfsNative.KIND_LIST ? "l" : "v")
                + (ttl ? "t:" : ":") + name;
        if (n.getBytes(java.nio.charset.StandardCharsets.UTF_8).length <= 47) {
            return n;
        }
        String prefix = n.substring(0, 30);
        while (prefix.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > 30) {
            prefix = prefix.substring(0, prefix.length() - 1);
        }
        return prefix + "~" + String.format("%016x", hash64(n));
    }

    private static long hash64(String s) {
        long h = 0xcbf29ce484222325L;
        for (byte b : s.getBytes(java.nio.charset.StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return h;
    }

    static int kindOf(StateDescriptor.Type t) {
        switch (t) {
            case LIST:
                return SfsNative.KIND_LIST;
            case MAP:
                return SfsNative.KIND_MAP;
            case VALUE:
            case REDUCING:
            case AGGREGATING:
                return SfsNative.KIND_VALUE;
            default:
                throw new UnsupportedOperationException("sfs-flink: state type " + t);
        }
    }

    /**
     * Registers (or finds) the sfs state of a Flink state name and type. @ttlMs > 0: sfs stamps
     * each entry's expiry and its maintenance drops expired ones (only with Flink's real clock,
     * {@link TtlTimeProvider#DEFAULT}: a test's mock clock is not the one sfs stamps with).
     * A new duration for a TTL state changes it; TTL on or off is a new sfs state.
     */
    Registered register(
            String name, StateDescriptor.Type type, RegisteredKeyValueStateBackendMetaInfo<?, ?> meta, long ttlMs) {
        Registered r = states.get(name);
        if (r != null) {
            if (ttlMs > 0 && r.ttlMs > 0 && ttlMs != r.ttlMs) {
                SfsNative.register(ctxHandle, sfsName(name, r.kind, true), r.kind, ttlMs);
                r.ttlMs = ttlMs;
            }
            return r;
        }
        int kind = kindOf(type);
        int id = SfsNative.register(ctxHandle, sfsName(name, kind, ttlMs > 0), kind, ttlMs);
        r = new Registered(meta, id, kind, ttlMs);
        states.put(name, r);
        return r;
    }

    /** The TTL sfs keeps for @desc's state: its duration, or 0. */
    long sfsTtlOf(StateDescriptor<?, ?> desc) {
        if (!desc.getTtlConfig().isEnabled() || ttlTimeProvider != TtlTimeProvider.DEFAULT) {
            return 0;
        }
        return Math.max(1, desc.getTtlConfig().getTimeToLive().toMillis());
    }

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public <N, SV, SEV, S extends State, IS extends S> IS createOrUpdateInternalState(
            TypeSerializer<N> namespaceSerializer,
            StateDescriptor<S, SV> stateDesc,
            StateSnapshotTransformFactory<SEV> snapshotTransformFactory)
            throws Exception {
        String name = stateDesc.getName();
        TypeSerializer<SV> serializer = stateDesc.getSerializer();
        Registered r = states.get(name);
        StateMetaInfoSnapshot restored = restoredMeta.get(name);
        if (r == null && restored != null) {
            // restored: the new serializers must be compatible with the snapshot's
            RegisteredKeyValueStateBackendMetaInfo<N, SV> meta =
                    new RegisteredKeyValueStateBackendMetaInfo<>(restored);
            r = register(name, meta.getStateType(), meta, sfsTtlOf(stateDesc));
        }
        if (r != null) {
            RegisteredKeyValueStateBackendMetaInfo<N, SV> meta =
                    (RegisteredKeyValueStateBackendMetaInfo<N, SV>) r.meta;
            TypeSerializer<N> prevNs = meta.getNamespaceSerializer();
            TypeSerializerSchemaCompatibility<N> nsc =
                    meta.updateNamespaceSerializer(namespaceSerializer);
            if (nsc.isCompatibleAfterMigration() || nsc.isIncompatible()) {
                throw new StateMigrationException(
                        "For the sfs backend, the new namespace serializer ("
                                + namespaceSerializer
                                + ") must be compatible with the old namespace serializer ("
                                + prevNs
                                + ").");
            }
            meta.checkStateMetaInfo(stateDesc);
            TypeSerializer<SV> prev = meta.getStateSerializer();
            TypeSerializerSchemaCompatibility<SV> sc = meta.updateStateSerializer(serializer);
            if (sc.isIncompatible()) {
                throw new StateMigrationException(
                        "For the sfs backend, the new state serializer ("
                                + serializer
                                + ") must not be incompatible with the old state serializer ("
                                + prev
                                + ").");
            }
            if (sc.isCompatibleAfterMigration()) {
                // sfs holds the old serializer's bytes; rewriting them is not built yet
                throw new StateMigrationException(
                        "The sfs backend cannot migrate state '"
                                + name
                                + "' from serializer "
                                + prev
                                + " to "
                                + serializer
                                + " yet (state schema evolution needs a migration of its bytes)");
            }
        } else {
            RegisteredKeyValueStateBackendMetaInfo<N, SV> meta =
                    new RegisteredKeyValueStateBackendMetaInfo<>(
                            stateDesc.getType(),
                            name,
                            namespaceSerializer,
                            serializer,
                            (StateSnapshotTransformFactory<SV>) StateSnapshotTransformFactory.noTransform());
            r = register(name, stateDesc.getType(), meta, sfsTtlOf(stateDesc));
        }
        long ttl = sfsTtlOf(stateDesc);
        if ((ttl > 0) != (r.ttlMs > 0)) {
            throw new StateMigrationException(
                    "State '" + name + "' turns its time-to-live " + (ttl > 0 ? "on" : "off")
                            + ": the sfs backend cannot migrate its entries yet");
        }
        if (ttl != r.ttlMs) {
            register(name, stateDesc.getType(), r.meta, ttl);
        }
        if (kindOf(stateDesc.getType()) != r.kind) {
            throw new StateMigrationException(
                    "State '" + name + "' was registered as another kind of state before");
        }
        AbstractSfsState state = r.state;
        if (state == null) {
            state = create(r.sfsId, namespaceSerializer, stateDesc);
            r.state = state;
        } else {
            state.update(namespaceSerializer, serializer, stateDesc.getDefaultValue());
            if (state instanceof SfsReducingState) {
                ((SfsReducingState) state)
                        .setReduceFunction(((ReducingStateDescriptor) stateDesc).getReduceFunction());
            } else if (state instanceof SfsAggregatingState) {
                ((SfsAggregatingState) state)
                        .setAggregateFunction(((AggregatingStateDescriptor) stateDesc).getAggregateFunction());
            }
        }
        return (IS) state;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private <N, SV> AbstractSfsState create(
            int id, TypeSerializer<N> ns, StateDescriptor<?, SV> d) {
        TypeSerializer ser = d.getSerializer();
        switch (d.getType()) {
            case VALUE:
                return new SfsValueState(this, id, ns, ser, d.getDefaultValue());
            case LIST:
                return new SfsListState(this, id, ns, ser);
            case MAP:
                return new SfsMapState(this, id, ns, ser);
            case REDUCING:
                return new SfsReducingState(
                        this, id, ns, ser, ((ReducingStateDescriptor) d).getReduceFunction());
            case AGGREGATING:
                return new SfsAggregatingState(
                        this, id, ns, ser, ((AggregatingStateDescriptor) d).getAggregateFunction());
            default:
                throw new UnsupportedOperationException(
                        "sfs-flink: state " + d.getName() + " of type " + d.getType());
        }
    }

    // ---- timers: Flink's heap priority queues --------------------------------------------

    @Override
    public <T extends HeapPriorityQueueElement & PriorityComparable<? super T> & Keyed<?>>
            KeyGroupedInternalPriorityQueue<T> create(
                    String stateName, TypeSerializer<T> byteOrderedElementSerializer) {
        return pqFactory.create(stateName, byteOrderedElementSerializer);
    }

    @Override
    public boolean requiresLegacySynchronousTimerSnapshots(SnapshotType checkpointType) {
        // heap timers are written by Flink as raw keyed state at the barrier
        return true;
    }

    // ---- sfs barrier ids ------------------------------------------------------------------

    /** Probes a checkpoint interval may hold (getKeys), below the next checkpoint's id. */
    static final int PROBES_SHIFT = 20;

    /**
     * The sfs barrier of Flink checkpoint @id: the slot's base plus the id × 2^20. The ids
     * between two checkpoints' are this backend's probes (a seal whose staged state getKeys
     * reads), so sfs's barrier ids keep increasing (Flink's ids stay below 2^43). The base is 0
     * in a never-used slot; in a reused one it is above every barrier the slot sealed before
     * (another job's checkpoint ids may be lower than the slot's last subtask's).
     */
    long barrierOf(long checkpointId) {
        return barrierBase + (checkpointId << PROBES_SHIFT);
    }

    /** Fixed before the first seal: {@link #barrierOf}. */
    private long barrierBase;

    /** A base above @slotLastBarrier, the last barrier the slot sealed in any opening. */
    void barriersAbove(long slotLastBarrier) {
        long mask = (1L << PROBES_SHIFT) - 1;
        barrierBase = (slotLastBarrier + mask) & ~mask;
        lastBarrier = slotLastBarrier;
    }

    /** A slot taken back in place (local recovery): its barriers go on as they were. */
    void barriersAsBefore(long base, long slotLastBarrier) {
        barrierBase = base;
        lastBarrier = slotLastBarrier;
    }

    /** Task thread: the last sfs barrier this backend sealed (a checkpoint's or a probe's). */
    private long lastBarrier;

    void sealed(long barrier) {
        lastBarrier = barrier;
    }

    long lastBarrier() {
        return lastBarrier;
    }

    // ---- reads of every key -------------------------------------------------------------

    /**
     * Every (key, namespace) of state @name, as serialized bytes, live now: the subtask's write
     * buffer is sealed by a probe barrier, the compactor stages the store as of it, and the
     * staged entries are read (map and list entries give their key once). O(state): a full
     * read of the subtask's state, as RocksDB's iterator is; then no copy is kept.
     */
    private List<byte[][]> keysOf(String name) throws IOException {
        Registered r = states.get(name);
        List<byte[][]> out = new ArrayList<>();
        if (r == null) {
            return out;
        }
        long probe = lastBarrier + 1;
        if ((probe & ((1L << PROBES_SHIFT) - 1)) == 0) {
            throw new IOException("sfs-flink: over 2^20 key scans since the last checkpoint");
        }
        SfsNative.barrier(ctxHandle, probe);
        lastBarrier = probe;
        String dir = SfsSnapshotStrategy.awaitStaged(this, probe);
        java.util.Set<java.nio.ByteBuffer> seen = new java.util.HashSet<>();
        try {
            synchronized (nativeLock) {
                SfsNative.scan(ctxHandle, dir, null, (state, kg, ns, key, ukey, value) -> {
                    if (state == r.sfsId && seen.add(java.nio.ByteBuffer.wrap(key))) {
                        int kl = key.length - (int) ns;
                        out.add(new byte[][] {
                            java.util.Arrays.copyOfRange(key, 0, kl),
                            java.util.Arrays.copyOfRange(key, kl, key.length)});
                    }
                });
            }
        } finally {
            synchronized (nativeLock) {
                SfsNative.dropStage(ctxHandle, dir);
            }
        }
        return out;
    }

    private <T> T deserialize(TypeSerializer<T> ser, byte[] b) {
        try {
            return ser.deserialize(new org.apache.flink.core.memory.DataInputDeserializer(b));
        } catch (IOException e) {
            throw new RuntimeException("sfs-flink: cannot deserialize a stored key or namespace", e);
        }
    }

    private static byte[] serialize(TypeSerializer<Object> ser, Object v) {
        org.apache.flink.core.memory.DataOutputSerializer o = new org.apache.flink.core.memory.DataOutputSerializer(32);
        try {
            ser.serialize(v, o);
        } catch (IOException e) {
            throw new RuntimeException("sfs-flink: cannot serialize namespace " + v, e);
        }
        return o.getCopyOfBuffer();
    }

    @Override
    @SuppressWarnings("unchecked")
    public <N> Stream<K> getKeys(String state, N namespace) {
        Registered r = states.get(state);
        if (r == null) {
            return Stream.empty();
        }
        byte[] ns = serialize((TypeSerializer<Object>) r.meta.getNamespaceSerializer(), namespace);
        try {
            return keysOf(state).stream()
                    .filter(kn -> java.util.Arrays.equals(kn[1], ns))
                    .map(kn -> deserialize(keySerializer, kn[0]));
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    @Override
    public <N> Stream<K> getKeys(List<String> states, N namespace) {
        return states.stream().flatMap(s -> getKeys(s, namespace)).distinct();
    }

    @Override
    @SuppressWarnings("unchecked")
    public <N> Stream<Tuple2<K, N>> getKeysAndNamespaces(String state) {
        Registered r = states.get(state);
        if (r == null) {
            return Stream.empty();
        }
        TypeSerializer<N> nsSer = (TypeSerializer<N>) r.meta.getNamespaceSerializer();
        try {
            return keysOf(state).stream()
                    .map(kn -> Tuple2.of(deserialize(keySerializer, kn[0]), deserialize(nsSer, kn[1])));
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    @Override
    public int numKeyValueStateEntries() {
        throw new UnsupportedOperationException("sfs-flink: numKeyValueStateEntries");
    }

    /**
     * No: a state read is a fresh object, but the timers are heap objects that keep the key
     * object they were registered under, so an operator that reuses (and mutates) its key
     * objects when this says yes — SQL's window buffers do — would move timers to other keys.
     */
    @Override
    public boolean isSafeToReuseKVState() {
        return false;
    }

    @Override
    public String getBackendTypeIdentifier() {
        return "sfs";
    }

    // ---- checkpoints --------------------------------------------------------------------

    @Override
    public RunnableFuture<SnapshotResult<KeyedStateHandle>> snapshot(
            long checkpointId,
            long timestamp,
            CheckpointStreamFactory streamFactory,
            CheckpointOptions checkpointOptions)
            throws Exception {
        return new SnapshotStrategyRunner<>(
                        "sfs backend snapshot",
                        strategy,
                        cancelStreamRegistry,
                        SnapshotExecutionType.ASYNCHRONOUS)
                .snapshot(checkpointId, timestamp, streamFactory, checkpointOptions);
    }

    @Override
    public SavepointResources<K> savepoint() {
        throw new UnsupportedOperationException(
                "sfs-flink writes native savepoints only (flink savepoint --type native); Flink's"
                        + " canonical format is not written yet");
    }

    /**
     * Flink completed a checkpoint: with local recovery, the compactor pins this subtask's
     * version of it (a store and a doorbell), so a restart in place can go back to it.
     */
    @Override
    public void notifyCheckpointComplete(long checkpointId) {
        strategy.notifyComplete(checkpointId);
        Written w = written.get(checkpointId);
        written.headMap(checkpointId, true).clear();
        if (!localRecovery || w == null || closedNative) {
            return;
        }
        SfsNative.pin(ctxHandle, barrierOf(checkpointId));
        pinned = w;
    }

    @Override
    public void notifyCheckpointAborted(long checkpointId) {
        strategy.notifyAborted(checkpointId);
        written.remove(checkpointId);
    }

    /** Meta infos of the registered states, in a fixed order (the snapshot's state indexes). */
    List<Registered> registeredInOrder() {
        return new ArrayList<>(states.values());
    }

    boolean nativeClosed() {
        return closedNative;
    }

    @Override
    public void dispose() {
        if (closedNative) {
            return;
        }
        super.dispose();
        boolean park = pinned != null;
        synchronized (nativeLock) {
            closedNative = true; // this backend makes no more native calls
            if (!park) {
                SfsNative.close(ctxHandle);
            }
        }
        if (park) {
            // the slot's store can go back to the pinned checkpoint: kept, its context open (so
            // no other process takes the slot), for a restart here
            group.park(new SfsHostGroup.Parked(slot, ctxHandle, parkKey, pinned.id, pinned.handleId, pinned.metas,
                    pinned.ids, barrierBase, lastBarrier));
        } else {
            group.release(slot); // emptied by its next subtask (SFS_WORKER_RESET)
        }
        releaseMemory.run();
        states.clear();
    }
}
