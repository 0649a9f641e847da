package io.sfs.flink.bench;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.hashmap.HashMapStateBackend;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.apache.flink.util.Collector;

import io.sfs.flink.SfsStateBackend;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * One keyed-state operation through Flink's state API, on each backend, in one subtask's
 * backend (built by Flink's operator test harness, as flink-benchmarks does): the key is set
 * (its serialization included), then one call. KEYS distinct Long keys are written first and
 * the benchmark walks them in a fixed stride, so reads hit existing state.
 *
 * <p>Backends as their users configure them: {@code rocksdb} is Flink's
 * EmbeddedRocksDBStateBackend with its defaults (incremental checkpoints, Flink's predefined
 * options; in the harness its memory is the mock environment's, not a TaskManager's managed
 * memory); {@code hashmap} is Flink's heap backend; {@code sfs} is ours on the table target
 * (its host group started by the harness: compactor and checkpointer on the other core).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xmx2g"})
public class StateOpBenchmark {
    static final int KEYS = 100_000;

    @Param({"sfs", "rocksdb", "hashmap"})
    public String backend;

    private KeyedOneInputStreamOperatorTestHarness<Long, Long, Long> harness;
    private KeyedStateBackend<Long> kb;
    private ValueState<Long> value;
    private MapState<Long, Long> map;
    private ListState<Long> list;
    private Path tmp;
    private long i;

    static class Nop extends KeyedProcessFunction<Long, Long, Long> {
        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) {}
    }

    @Setup(Level.Trial)
    public void setup() throws Exception {
        tmp = Files.createTempDirectory("sfs-jmh");
        StateBackend b;
        switch (backend) {
            case "sfs":
                b = new SfsStateBackend()
                        .setBinDir(System.getProperty("sfs.bin"))
                        .setDataDir(tmp.toString());
                break;
            case "rocksdb":
                b = new EmbeddedRocksDBStateBackend(true);
                break;
            default:
                b = new HashMapStateBackend();
        }
        harness = new KeyedOneInputStreamOperatorTestHarness<>(
                new KeyedProcessOperator<>(new Nop()), v -> v, Types.LONG);
        harness.setStateBackend(b);
        harness.open();
        kb = harness.getOperator().getKeyedStateBackend();
        value = kb.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
                new ValueStateDescriptor<>("value", Types.LONG));
        map = kb.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
                new MapStateDescriptor<>("map", Types.LONG, Types.LONG));
        list = kb.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
                new ListStateDescriptor<>("list", Types.LONG));
        for (long k = 0; k < KEYS; k++) {
            kb.setCurrentKey(k);
            value.update(k);
            map.put(k & 7, k);
        }
    }

    private long nextKey() {
        i += 7919; // a prime stride over the keys
        return i % KEYS;
    }

    @Benchmark
    public Long valueGet() throws Exception {
        kb.setCurrentKey(nextKey());
        return value.value();
    }

    @Benchmark
    public void valueUpdate() throws Exception {
        long k = nextKey();
        kb.setCurrentKey(k);
        value.update(k + 1);
    }

    /** An aggregation's step: read, add, write. */
    @Benchmark
    public void valueReadModifyWrite() throws Exception {
        kb.setCurrentKey(nextKey());
        Long v = value.value();
        value.update(v == null ? 1 : v + 1);
    }

    @Benchmark
    public Long mapGet() throws Exception {
        long k = nextKey();
        kb.setCurrentKey(k);
        return map.get(k & 7);
    }

    @Benchmark
    public void mapPut() throws Exception {
        long k = nextKey();
        kb.setCurrentKey(k);
        map.put(k & 7, k);
    }

    @TearDown(Level.Trial)
    public void teardown() throws Exception {
        harness.close();
    }
}
