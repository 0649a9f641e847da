package io.sfs.flink;

import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.state.AggregatingStateDescriptor;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.runtime.state.internal.InternalMergingState;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.AbstractStreamOperatorTestHarness;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A randomized model test of every keyed state kind: the same random sequence of operations runs
 * through Flink's operator harness on sfs and on Flink's HashMap backend, and every read must
 * match. Value, list, map, reducing and aggregating state, each in namespaces, with clear, null
 * map values, empty lists, merges of namespaces, TTL on a mock clock, key scans; across the
 * sequence checkpoints, restores (sometimes to a checkpoint older than the last writes) and
 * rescales 2→3→2 at max parallelism 128 and 32768.
 *
 * <p>Every write is followed by a read of what it wrote in the same call (read-your-writes). The
 * TTL state is also checked against a model of its own (an expired value is never returned), so
 * that check holds even while sfs falls back to hashmap. Each run counts what it exercised and
 * fails if a kind of check never happened (a model test that silently tests nothing).
 */
class StateModelTest {
    static final long TTL_MS = 100;

    // ---------------------------------------------------------------- the tests

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {1, 2, 3})
    void randomOperationsAcrossRestores(long seed) throws Exception {
        Stats st = run(new Scenario(seed));
        assertExercised(st, "checkpoints", "restores", "restores dropping later writes", "merges",
                "non-empty reads", "empty list writes", "null map values", "ttl live reads",
                "ttl expired reads");
    }

    @Test
    void rescale2to3to2() throws Exception {
        Scenario sc = new Scenario(11);
        sc.parallelisms = new int[] {2, 3, 2};
        Stats st = run(sc);
        assertThat(st.get("rescales")).as("rescales in %s", st.counts).isGreaterThanOrEqualTo(2);
        assertExercised(st, "restores dropping later writes", "merges", "non-empty reads");
    }

    @Test
    void rescaleAtMaxParallelism32768() throws Exception {
        Scenario sc = new Scenario(12);
        sc.maxParallelism = 32768;
        sc.parallelisms = new int[] {2, 3, 2};
        // Flink's heap backend snapshots one map per key group and state: ~1 s per checkpoint
        sc.ops = 1500;
        sc.maxCheckpoints = 2;
        Stats st = run(sc);
        assertThat(st.get("rescales")).as("rescales in %s", st.counts).isGreaterThanOrEqualTo(2);
        assertExercised(st, "merges", "non-empty reads");
    }

    @Test
    void keyScansMatch() throws Exception {
        Scenario sc = new Scenario(21);
        sc.scans = true;
        sc.parallelisms = new int[] {1, 2};
        Stats st = run(sc);
        assertThat(st.get("scans")).as("scans in %s", st.counts).isGreaterThan(50);
        assertExercised(st, "scans finding keys", "rescales");
    }

    @Test
    void expiredTtlValuesAreNeverReturned() throws Exception {
        Scenario sc = new Scenario(31);
        sc.ttlHeavy = true;
        sc.ops = 2000;
        Stats st = run(sc);
        assertThat(st.get("ttl expired reads")).as("in %s", st.counts).isGreaterThan(50);
        assertThat(st.get("ttl live reads")).as("in %s", st.counts).isGreaterThan(50);
        assertExercised(st, "restores");
    }

    /** A run that never reached one of these checks tested nothing there. */
    static void assertExercised(Stats st, String... what) {
        for (String w : what) {
            assertThat(st.get(w)).as("'%s' never happened in %s", w, st.counts).isGreaterThan(0);
        }
    }

    // ---------------------------------------------------------------- the operations

    enum Kind {
        VALUE_GET, VALUE_SET, VALUE_CLEAR,
        LIST_GET, LIST_ADD, LIST_ADD_ALL, LIST_UPDATE, LIST_CLEAR, LIST_MERGE,
        MAP_GET, MAP_PUT, MAP_PUT_ALL, MAP_REMOVE, MAP_CONTAINS, MAP_READ_ALL, MAP_ITER_REMOVE,
        MAP_CLEAR,
        REDUCE_GET, REDUCE_ADD, REDUCE_CLEAR, REDUCE_MERGE,
        AGG_GET, AGG_ADD, AGG_CLEAR, AGG_MERGE,
        TTL_GET, TTL_SET
    }

    /** One keyed operation: what the test operator does for (key, namespace). */
    static final class Op implements Serializable {
        private static final long serialVersionUID = 1L;
        final Kind kind;
        final String key;
        final String ns;
        final Long n; // value / reducing / aggregating input; map value (null allowed)
        final String s; // list element, map user key, TTL value
        final List<String> list; // addAll / update (may be empty)
        final Map<String, Long> map; // putAll (null values allowed)
        final List<String> sources; // merge sources

        Op(Kind kind, String key, String ns, Long n, String s, List<String> list,
                Map<String, Long> map, List<String> sources) {
            this.kind = kind;
            this.key = key;
            this.ns = ns;
            this.n = n;
            this.s = s;
            this.list = list;
            this.map = map;
            this.sources = sources;
        }

        @Override
        public String toString() {
            return kind + "(key=" + abbrev(key) + ", ns=" + ns + ", n=" + n + ", s=" + abbrev(s)
                    + (list != null ? ", list=" + list.size() : "")
                    + (map != null ? ", map=" + map : "")
                    + (sources != null ? ", sources=" + sources : "") + ")";
        }
    }

    static String abbrev(String s) {
        return s == null || s.length() <= 24 ? s : s.substring(0, 20) + "...(" + s.length() + ")";
    }

    static final class OpKey implements KeySelector<Op, String> {
        private static final long serialVersionUID = 1L;

        @Override
        public String getKey(Op op) {
            return op.key;
        }
    }

    static final class Sum implements ReduceFunction<Long> {
        private static final long serialVersionUID = 1L;

        @Override
        public Long reduce(Long a, Long b) {
            return a + b;
        }
    }

    /** sum/count: an aggregate whose accumulator differs from its input and output. */
    static final class Avg implements AggregateFunction<Long, Tuple2<Long, Long>, String> {
        private static final long serialVersionUID = 1L;

        @Override
        public Tuple2<Long, Long> createAccumulator() {
            return Tuple2.of(0L, 0L);
        }

        @Override
        public Tuple2<Long, Long> add(Long v, Tuple2<Long, Long> acc) {
            return Tuple2.of(acc.f0 + v, acc.f1 + 1);
        }

        @Override
        public String getResult(Tuple2<Long, Long> acc) {
            return acc.f0 + "/" + acc.f1;
        }

        @Override
        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1);
        }
    }

    // ---------------------------------------------------------------- the operator

    /**
     * Interprets an {@link Op}, emits what it read as one string. All states are registered at
     * open (so a restored backend knows them before the first access), in String namespaces.
     */
    static final class ModelOperator extends AbstractStreamOperator<String>
            implements OneInputStreamOperator<Op, String> {
        private static final long serialVersionUID = 1L;
        static final List<String> SCANNABLE = List.of("value", "list", "map", "reduce", "agg");

        transient ValueStateDescriptor<Long> valueD;
        transient ListStateDescriptor<String> listD;
        transient MapStateDescriptor<String, Long> mapD;
        transient ReducingStateDescriptor<Long> reduceD;
        transient AggregatingStateDescriptor<Long, Tuple2<Long, Long>, String> aggD;
        transient ValueStateDescriptor<String> ttlD;

        @Override
        public void open() throws Exception {
            super.open();
            valueD = new ValueStateDescriptor<>("value", Types.LONG);
            listD = new ListStateDescriptor<>("list", Types.STRING);
            mapD = new MapStateDescriptor<>("map", Types.STRING, Types.LONG);
            reduceD = new ReducingStateDescriptor<>("reduce", new Sum(), Types.LONG);
            aggD = new AggregatingStateDescriptor<>("agg", new Avg(), Types.TUPLE(Types.LONG, Types.LONG));
            ttlD = new ValueStateDescriptor<>("ttl", Types.STRING);
            ttlD.enableTimeToLive(StateTtlConfig.newBuilder(Duration.ofMillis(TTL_MS))
                    .setUpdateType(StateTtlConfig.UpdateType.OnCreateAndWrite)
                    .setStateVisibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
                    .build());
            for (StateDescriptor<?, ?> d : List.of(valueD, listD, mapD, reduceD, aggD, ttlD)) {
                state("", d);
            }
        }

        private <S extends State> S state(String ns, StateDescriptor<S, ?> d) throws Exception {
            return getPartitionedState(ns, StringSerializer.INSTANCE, d);
        }

        @SuppressWarnings("unchecked")
        private void merge(String target, List<String> sources, StateDescriptor<?, ?> d) throws Exception {
            ((InternalMergingState<String, String, ?, ?, ?>) state(target, d)).mergeNamespaces(target, sources);
        }

        @Override
        public void processElement(StreamRecord<Op> element) throws Exception {
            output.collect(new StreamRecord<>(apply(element.getValue())));
        }

        String apply(Op op) throws Exception {
            String ns = op.ns;
            switch (op.kind) {
                case VALUE_GET:
                    return "v=" + state(ns, valueD).value();
                case VALUE_SET:
                    state(ns, valueD).update(op.n); // update(null) is a clear
                    return "v=" + state(ns, valueD).value();
                case VALUE_CLEAR:
                    state(ns, valueD).clear();
                    return "v=" + state(ns, valueD).value();

                case LIST_GET:
                    return readList(ns);
                case LIST_ADD:
                    state(ns, listD).add(op.s);
                    return readList(ns);
                case LIST_ADD_ALL:
                    state(ns, listD).addAll(op.list);
                    return readList(ns);
                case LIST_UPDATE:
                    state(ns, listD).update(op.list);
                    return readList(ns);
                case LIST_CLEAR:
                    state(ns, listD).clear();
                    return readList(ns);
                case LIST_MERGE: {
                    merge(ns, op.sources, listD);
                    StringBuilder b = new StringBuilder(readList(ns));
                    for (String src : op.sources) {
                        b.append(" src ").append(src).append(' ').append(readList(src));
                    }
                    return b.toString();
                }

                case MAP_GET:
                    return "m[" + op.s + "]=" + state(ns, mapD).get(op.s);
                case MAP_PUT:
                    state(ns, mapD).put(op.s, op.n);
                    return "m[" + op.s + "]=" + state(ns, mapD).get(op.s)
                            + " contains=" + state(ns, mapD).contains(op.s);
                case MAP_PUT_ALL:
                    state(ns, mapD).putAll(op.map);
                    return readMap(ns);
                case MAP_REMOVE:
                    state(ns, mapD).remove(op.s);
                    return "contains=" + state(ns, mapD).contains(op.s) + " " + readMap(ns);
                case MAP_CONTAINS:
                    return "contains(" + op.s + ")=" + state(ns, mapD).contains(op.s);
                case MAP_READ_ALL:
                    return readMap(ns);
                case MAP_ITER_REMOVE: {
                    // removes through the iterator, but never the last entry: Flink's heap map
                    // keeps an empty map behind (a key getKeys still lists), which is not a
                    // behaviour worth pinning other backends to
                    MapState<String, Long> m = state(ns, mapD);
                    int size = 0;
                    for (Iterator<String> it = m.keys().iterator(); it.hasNext(); it.next()) {
                        size++;
                    }
                    boolean removed = false;
                    if (size >= 2) {
                        for (Iterator<Map.Entry<String, Long>> it = m.iterator(); it.hasNext(); ) {
                            if (it.next().getKey().equals(op.s)) {
                                it.remove();
                                removed = true;
                            }
                        }
                    }
                    return "removed=" + removed + " " + readMap(ns);
                }
                case MAP_CLEAR:
                    state(ns, mapD).clear();
                    return readMap(ns);

                case REDUCE_GET:
                    return "r=" + state(ns, reduceD).get();
                case REDUCE_ADD:
                    state(ns, reduceD).add(op.n);
                    return "r=" + state(ns, reduceD).get();
                case REDUCE_CLEAR:
                    state(ns, reduceD).clear();
                    return "r=" + state(ns, reduceD).get();
                case REDUCE_MERGE: {
                    merge(ns, op.sources, reduceD);
                    StringBuilder b = new StringBuilder("r=" + state(ns, reduceD).get());
                    for (String src : op.sources) {
                        b.append(" src ").append(src).append(" r=").append(state(src, reduceD).get());
                    }
                    return b.toString();
                }

                case AGG_GET:
                    return "a=" + state(ns, aggD).get();
                case AGG_ADD:
                    state(ns, aggD).add(op.n);
                    return "a=" + state(ns, aggD).get();
                case AGG_CLEAR:
                    state(ns, aggD).clear();
                    return "a=" + state(ns, aggD).get();
                case AGG_MERGE: {
                    merge(ns, op.sources, aggD);
                    StringBuilder b = new StringBuilder("a=" + state(ns, aggD).get());
                    for (String src : op.sources) {
                        b.append(" src ").append(src).append(" a=").append(state(src, aggD).get());
                    }
                    return b.toString();
                }

                case TTL_GET:
                    return "t=" + state(ns, ttlD).value();
                case TTL_SET:
                    state(ns, ttlD).update(op.s);
                    return "t=" + state(ns, ttlD).value();
                default:
                    throw new AssertionError(op.kind);
            }
        }

        /** null and an empty list are different answers: Flink's window operator relies on null. */
        private String readList(String ns) throws Exception {
            Iterable<String> it = state(ns, listD).get();
            if (it == null) {
                return "l=null";
            }
            List<String> out = new ArrayList<>();
            it.forEach(out::add);
            return "l=" + out.stream().map(StateModelTest::abbrev).collect(Collectors.toList());
        }

        /** Every way of reading a map, each sorted (iteration order is the backend's). */
        private String readMap(String ns) throws Exception {
            MapState<String, Long> m = state(ns, mapD);
            TreeMap<String, String> entries = new TreeMap<>();
            for (Map.Entry<String, Long> e : m.entries()) {
                entries.put(e.getKey(), String.valueOf(e.getValue()));
            }
            TreeSet<String> keys = new TreeSet<>();
            m.keys().forEach(keys::add);
            List<String> values = new ArrayList<>();
            m.values().forEach(v -> values.add(String.valueOf(v)));
            Collections.sort(values);
            TreeMap<String, String> iterated = new TreeMap<>();
            for (Iterator<Map.Entry<String, Long>> it = m.iterator(); it.hasNext(); ) {
                Map.Entry<String, Long> e = it.next();
                iterated.put(e.getKey(), String.valueOf(e.getValue()));
            }
            return "m=" + entries + " keys=" + keys + " values=" + values + " iter=" + iterated
                    + " empty=" + m.isEmpty();
        }

        /** getKeys and getKeysAndNamespaces of one state, as sorted sets. */
        String scan(String stateName, String ns) {
            TreeSet<String> keys = new TreeSet<>();
            TreeSet<String> keysAndNs = new TreeSet<>();
            KeyedStateBackend<String> backend = getKeyedStateBackend();
            try (Stream<String> s = backend.getKeys(stateName, ns)) {
                s.forEach(keys::add);
            }
            try (Stream<Tuple2<String, String>> s = backend.<String>getKeysAndNamespaces(stateName)) {
                s.forEach(t -> keysAndNs.add(abbrev(t.f0) + "|" + t.f1));
            }
            return "getKeys(" + stateName + ", " + ns + ")="
                    + keys.stream().map(StateModelTest::abbrev).collect(Collectors.toList())
                    + " getKeysAndNamespaces=" + keysAndNs;
        }
    }

    // ---------------------------------------------------------------- one backend, all its subtasks

    /** The subtasks of one backend at the current parallelism. */
    @SuppressWarnings("try") // close() may throw InterruptedException, as the harness's does
    static final class Side implements AutoCloseable {
        final String name;
        final StateBackend backend;
        final int maxParallelism;
        final List<KeyedOneInputStreamOperatorTestHarness<String, Op, String>> subtasks = new ArrayList<>();
        int parallelism;

        Side(String name, StateBackend backend, int maxParallelism) {
            this.name = name;
            this.backend = backend;
            this.maxParallelism = maxParallelism;
        }

        /** Opens {@code p} subtasks, each from its restored state (or empty when null). */
        void open(int p, OperatorSubtaskState[] restored, long now) throws Exception {
            for (int i = 0; i < p; i++) {
                KeyedOneInputStreamOperatorTestHarness<String, Op, String> h =
                        new KeyedOneInputStreamOperatorTestHarness<>(
                                new ModelOperator(), new OpKey(), Types.STRING, maxParallelism, p, i);
                h.setStateBackend(backend);
                h.setStateTtlProcessingTime(now);
                if (restored != null) {
                    h.initializeState(restored[i]);
                }
                h.open();
                subtasks.add(h);
            }
            parallelism = p;
        }

        int subtaskOf(String key) {
            return KeyGroupRangeAssignment.assignKeyToParallelOperator(key, maxParallelism, parallelism);
        }

        String process(Op op, long ts) throws Exception {
            KeyedOneInputStreamOperatorTestHarness<String, Op, String> h = subtasks.get(subtaskOf(op.key));
            h.processElement(op, ts);
            List<String> out = h.extractOutputValues();
            h.getOutput().clear();
            assertThat(out).as("%s: one output for %s", name, op).hasSize(1);
            return out.get(0);
        }

        List<String> scan(String stateName, String ns) {
            List<String> out = new ArrayList<>();
            for (KeyedOneInputStreamOperatorTestHarness<String, Op, String> h : subtasks) {
                out.add(((ModelOperator) h.getOperator()).scan(stateName, ns));
            }
            return out;
        }

        void tick(long now) {
            for (KeyedOneInputStreamOperatorTestHarness<String, Op, String> h : subtasks) {
                h.setStateTtlProcessingTime(now);
            }
        }

        Checkpoint snapshot(long id) throws Exception {
            OperatorSubtaskState[] states = new OperatorSubtaskState[parallelism];
            for (int i = 0; i < parallelism; i++) {
                states[i] = subtasks.get(i).snapshot(id, id * 10);
            }
            for (KeyedOneInputStreamOperatorTestHarness<String, Op, String> h : subtasks) {
                h.notifyOfCompletedCheckpoint(id);
            }
            return new Checkpoint(id, states);
        }

        /** Closes every subtask and opens {@code p} new ones from the checkpoint. */
        void restore(Checkpoint cp, int p, long now) throws Exception {
            close();
            int oldP = cp.states.length;
            OperatorSubtaskState[] restored = new OperatorSubtaskState[p];
            if (oldP == p) {
                restored = cp.states;
            } else {
                OperatorSubtaskState all = AbstractStreamOperatorTestHarness.repackageState(cp.states);
                for (int i = 0; i < p; i++) {
                    restored[i] = AbstractStreamOperatorTestHarness.repartitionOperatorState(
                            all, maxParallelism, oldP, p, i);
                }
            }
            open(p, restored, now);
        }

        @Override
        public void close() throws Exception {
            for (KeyedOneInputStreamOperatorTestHarness<String, Op, String> h : subtasks) {
                h.close();
            }
            subtasks.clear();
        }
    }

    static final class Checkpoint {
        final long id;
        final OperatorSubtaskState[] states;

        Checkpoint(long id, OperatorSubtaskState[] states) {
            this.id = id;
            this.states = states;
        }
    }

    static final class TtlEntry {
        final String value;
        final long written;

        TtlEntry(String value, long written) {
            this.value = value;
            this.written = written;
        }
    }

    // ---------------------------------------------------------------- the random sequence

    static final List<String> NAMESPACES = List.of("w0", "w1", "w2", "w3", "");

    /** What one run does. */
    static final class Scenario {
        long seed;
        int ops = 3000;
        int maxParallelism = 128;
        int[] parallelisms = {1}; // the i-th restore opens parallelisms[min(i, len-1)] subtasks
        int maxCheckpoints = Integer.MAX_VALUE;
        boolean scans;
        boolean ttlHeavy;

        Scenario(long seed) {
            this.seed = seed;
        }
    }

    /** Counts of what a run exercised: each must be non-zero at the end. */
    static final class Stats {
        final Map<String, Integer> counts = new TreeMap<>();

        void inc(String what) {
            counts.merge(what, 1, Integer::sum);
        }

        int get(String what) {
            return counts.getOrDefault(what, 0);
        }
    }

    static final class Gen {
        final java.util.Random r;
        final List<String> keys = new ArrayList<>();
        final List<String> userKeys = new ArrayList<>();
        final boolean ttlHeavy;
        final boolean scans;

        Gen(long seed, boolean ttlHeavy, boolean scans) {
            r = new java.util.Random(seed);
            this.ttlHeavy = ttlHeavy;
            this.scans = scans;
            for (int i = 0; i < 40; i++) {
                keys.add("k" + i);
            }
            keys.add(""); // the empty key
            keys.add("K".repeat(300)); // a key longer than any fixed-size slot
            keys.add("ключ-✓"); // multi-byte UTF-8
            for (int i = 0; i < 10; i++) {
                userKeys.add("u" + i);
            }
            userKeys.add("");
            userKeys.add("U".repeat(200));
        }

        String pick(List<String> l) {
            return l.get(r.nextInt(l.size()));
        }

        long number() {
            switch (r.nextInt(20)) {
                case 0:
                    return Long.MAX_VALUE;
                case 1:
                    return Long.MIN_VALUE;
                case 2:
                    return 0;
                default:
                    return r.nextInt(2001) - 1000;
            }
        }

        String element() {
            switch (r.nextInt(15)) {
                case 0:
                    return "";
                case 1:
                    return "E".repeat(100 + r.nextInt(2000));
                default:
                    return "e" + r.nextInt(1000);
            }
        }

        List<String> elements() {
            int n = r.nextInt(4) == 0 ? 0 : 1 + r.nextInt(5); // empty lists a quarter of the time
            List<String> l = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                l.add(element());
            }
            return l;
        }

        /**
         * Entries for putAll. Never empty when the run scans keys: Flink's heap map state keeps
         * an empty map behind putAll(empty), a key getKeys lists though it holds nothing — not a
         * behaviour worth pinning other backends to (RocksDB does not have it either).
         */
        Map<String, Long> entries() {
            Map<String, Long> m = new LinkedHashMap<>();
            int n = scans ? 1 + r.nextInt(4) : r.nextInt(5);
            for (int i = 0; i < n; i++) {
                m.put(pick(userKeys), r.nextInt(6) == 0 ? null : number());
            }
            return m;
        }

        List<String> sources(String target) {
            List<String> others = new ArrayList<>(NAMESPACES);
            others.remove(target);
            Collections.shuffle(others, r);
            return new ArrayList<>(others.subList(0, 1 + r.nextInt(3)));
        }

        Op next() {
            Kind[] kinds = Kind.values();
            Kind k;
            if (ttlHeavy && r.nextInt(4) != 0) {
                k = r.nextBoolean() ? Kind.TTL_GET : Kind.TTL_SET;
            } else {
                k = kinds[r.nextInt(kinds.length)];
            }
            // a third of the keys and two namespaces take most of the traffic, so state builds up
            String key = r.nextInt(3) == 0 ? pick(keys) : keys.get(r.nextInt(12));
            String ns = r.nextInt(3) == 0 ? pick(NAMESPACES) : NAMESPACES.get(r.nextInt(2));
            switch (k) {
                case VALUE_SET:
                    return new Op(k, key, ns, r.nextInt(10) == 0 ? null : number(), null, null, null, null);
                case LIST_ADD:
                case TTL_SET:
                    return new Op(k, key, ns, null, element(), null, null, null);
                case LIST_ADD_ALL:
                case LIST_UPDATE:
                    return new Op(k, key, ns, null, null, elements(), null, null);
                case MAP_GET:
                case MAP_REMOVE:
                case MAP_CONTAINS:
                case MAP_ITER_REMOVE:
                    return new Op(k, key, ns, null, pick(userKeys), null, null, null);
                case MAP_PUT:
                    return new Op(k, key, ns, r.nextInt(6) == 0 ? null : number(), pick(userKeys), null, null, null);
                case MAP_PUT_ALL:
                    return new Op(k, key, ns, null, null, null, entries(), null);
                case REDUCE_ADD:
                case AGG_ADD:
                    return new Op(k, key, ns, (long) (r.nextInt(2001) - 1000), null, null, null, null);
                case LIST_MERGE:
                case REDUCE_MERGE:
                case AGG_MERGE:
                    return new Op(k, key, ns, null, null, null, null, sources(ns));
                default:
                    return new Op(k, key, ns, null, null, null, null, null);
            }
        }
    }

    /** A checkpoint of both sides, not yet restored from. */
    static final class Pending {
        final Checkpoint sfs;
        final Checkpoint hashmap;
        final Map<String, TtlEntry> ttlModel; // the TTL model as of the checkpoint
        final int takenAt;

        Pending(Checkpoint sfs, Checkpoint hashmap, Map<String, TtlEntry> ttlModel, int takenAt) {
            this.sfs = sfs;
            this.hashmap = hashmap;
            this.ttlModel = ttlModel;
            this.takenAt = takenAt;
        }
    }

    /** Runs one scenario on sfs and on hashmap, comparing every read. */
    @SuppressWarnings("try")
    static Stats run(Scenario sc) throws Exception {
        Gen g = new Gen(sc.seed, sc.ttlHeavy, sc.scans);
        Stats st = new Stats();
        Map<String, TtlEntry> ttlModel = new HashMap<>();
        long now = 1_000;
        long nextCheckpointId = 1;
        int restores = 0;
        Pending pending = null;
        int restoreAt = -1;
        int nextSnapshot = 150 + g.r.nextInt(300);

        try (Side a = new Side(TestBackends.sfsName(), TestBackends.sfs(TestBackends.dataDir("model-" + sc.seed)), sc.maxParallelism);
                Side b = new Side("hashmap", TestBackends.hashmap(), sc.maxParallelism)) {
            a.open(sc.parallelisms[0], null, now);
            b.open(sc.parallelisms[0], null, now);
            for (int i = 0; i < sc.ops; i++) {
                if (i == nextSnapshot && st.get("checkpoints") < sc.maxCheckpoints) {
                    long id = nextCheckpointId++;
                    pending = new Pending(a.snapshot(id), b.snapshot(id), new HashMap<>(ttlModel), i);
                    // restore at once, or after more writes that the restore must drop
                    restoreAt = i + (g.r.nextBoolean() ? 0 : 1 + g.r.nextInt(150));
                    nextSnapshot = restoreAt + 150 + g.r.nextInt(300);
                    st.inc("checkpoints");
                }
                if (i == restoreAt) {
                    restores++;
                    int p = sc.parallelisms[Math.min(restores, sc.parallelisms.length - 1)];
                    if (p != a.parallelism) {
                        st.inc("rescales");
                    }
                    if (i > pending.takenAt) {
                        st.inc("restores dropping later writes");
                    }
                    a.restore(pending.sfs, p, now);
                    b.restore(pending.hashmap, p, now);
                    ttlModel = new HashMap<>(pending.ttlModel);
                    pending = null;
                    st.inc("restores");
                }
                String where = "seed " + sc.seed + ", op " + i + ", parallelism " + a.parallelism
                        + ", restores " + restores;

                int dice = g.r.nextInt(100);
                if (dice < (sc.ttlHeavy ? 15 : 3)) {
                    now += g.r.nextInt(60);
                    a.tick(now);
                    b.tick(now);
                    continue;
                }
                if (sc.scans && dice < 6) {
                    String stateName = g.pick(ModelOperator.SCANNABLE);
                    String ns = g.pick(NAMESPACES);
                    List<String> sa = a.scan(stateName, ns);
                    List<String> sb = b.scan(stateName, ns);
                    assertThat(sa).as("%s: scan of %s in namespace '%s', per subtask", where, stateName, ns)
                            .isEqualTo(sb);
                    st.inc("scans");
                    if (sb.stream().anyMatch(s -> !s.contains(")=[] "))) {
                        st.inc("scans finding keys");
                    }
                    continue;
                }

                Op op = g.next();
                String ra = a.process(op, i);
                String rb = b.process(op, i);
                assertThat(ra).as("%s: %s on %s vs hashmap", where, op, a.name).isEqualTo(rb);
                count(st, op, rb);
                checkTtl(st, op, ra, ttlModel, now, where);
            }
            return st;
        }
    }

    /** The TTL state's own model: a value is returned iff written less than TTL_MS ago. */
    static void checkTtl(Stats st, Op op, String got, Map<String, TtlEntry> model, long now, String where) {
        String k = op.key + "\u0000" + op.ns;
        if (op.kind == Kind.TTL_SET) {
            model.put(k, new TtlEntry(op.s, now));
            assertThat(got).as("%s: read-your-writes of a TTL value", where).isEqualTo("t=" + op.s);
        } else if (op.kind == Kind.TTL_GET) {
            TtlEntry e = model.get(k);
            boolean live = e != null && now < e.written + TTL_MS;
            st.inc(e == null ? "ttl reads of nothing" : live ? "ttl live reads" : "ttl expired reads");
            assertThat(got).as("%s: TTL read of %s (written %s, now %d, ttl %d)", where, op,
                            e == null ? "never" : String.valueOf(e.written), now, TTL_MS)
                    .isEqualTo("t=" + (live ? e.value : null));
        }
    }

    static void count(Stats st, Op op, String read) {
        st.inc("ops");
        if (op.kind.name().endsWith("_MERGE")) {
            st.inc("merges");
        }
        if (!read.contains("=null") && !read.contains("=[]") && !read.contains("={}")) {
            st.inc("non-empty reads");
        }
        if (op.list != null && op.list.isEmpty()) {
            st.inc("empty list writes");
        }
        if (op.kind == Kind.MAP_PUT && op.n == null) {
            st.inc("null map values");
        }
    }
}
