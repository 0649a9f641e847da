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
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.state.rocksdb.RocksDBOptions;
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
 * (its serialization included), then one call. {@code keys} distinct Long keys are written first and
 * the benchmark walks them in a fixed stride, so reads hit existing state.
 *
 * <p>Backends as their users configure them, with the same memory budget (the harness has no
 * TaskManager managed memory, so each is given {@code MEMORY_MB} explicitly, as a slot's share
 * of managed memory would give it): {@code rocksdb} is Flink's EmbeddedRocksDBStateBackend with
 * its defaults (incremental checkpoints, Flink's predefined options) and
 * {@code state.backend.rocksdb.memory.fixed-per-slot} = MEMORY_MB (block cache and write
 * buffers); {@code sfs} is ours on the table target with that budget split as a slot's managed
 * memory is (half its 4 write buffers, half its value cache; its host group's compactor and
 * checkpointer on the other core); {@code hashmap} is Flink's heap backend.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xmx2g"})
public class StateOpBenchmark {
    static final int MEMORY_MB = 256;

    /** Distinct keys written before the run: 100,000 fit every backend's 256 MB; 5,000,000
     * (about 400 MB of keys and values) do not, so reads go below the caches. */
    @Param({"100000"})
    public int keys;

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
                        .setDataDir(tmp.toString())
                        .setMemoryMb(MEMORY_MB / 8, MEMORY_MB / 2);
                break;
            case "rocksdb": {
                Configuration c = new Configuration();
                c.set(RocksDBOptions.FIX_PER_SLOT_MEMORY_SIZE, MemorySize.ofMebiBytes(MEMORY_MB));
                b = new EmbeddedRocksDBStateBackend(true).configure(c, getClass().getClassLoader());
                break;
            }
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
        for (long k = 0; k < keys; k++) {
            kb.setCurrentKey(k);
            value.update(k);
            map.put(k & 7, k);
        }
    }

    private long nextKey() {
        i += 7919; // a prime stride over the keys
        return i % keys;
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
