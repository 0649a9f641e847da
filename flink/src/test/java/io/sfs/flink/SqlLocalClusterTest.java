package io.sfs.flink;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * SQL and DataStream jobs on a local cluster in this JVM (parallelism 2, 256 MB managed memory,
 * incremental checkpoints every 200 ms), each run on sfs and on Flink's HashMap backend: the
 * final results, as sorted row lists, must be equal, and equal to what the same query computes
 * over the same data in plain Java. The sources are rate limited so that each job spans several
 * checkpoints (about two seconds each).
 *
 * <p>(a) a regular left join of two streams, (b) a tumbling event-time window aggregate, (c) a
 * top-N (ROW_NUMBER), (d) a DataStream job with keyed event-time timers.
 */
class SqlLocalClusterTest {
    /** Checkpoints. */
    @TempDir static Path tmp;

    /** One sfs host group for the whole class (a group per job would be a group per cluster). */
    static final Path SFS_DATA = TestBackends.dataDir("sql-local-cluster");

    static final int ORDERS = 2000; // id 1..ORDERS
    static final int PAYMENTS = 1500; // pid 1..PAYMENTS
    static final int ROWS_PER_SECOND = 2000;

    static final String DDL_ORDERS =
            "CREATE TEMPORARY TABLE orders (\n"
                    + "  id BIGINT,\n"
                    + "  k AS id % 17,\n"
                    + "  amount AS id * 37 % 101,\n"
                    + "  ts AS TO_TIMESTAMP_LTZ(id * 100, 3),\n"
                    + "  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND\n"
                    + ") WITH ('connector' = 'datagen', 'rows-per-second' = '" + ROWS_PER_SECOND + "',\n"
                    + "  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '" + ORDERS + "')";
    static final String DDL_PAYMENTS =
            "CREATE TEMPORARY TABLE payments (\n"
                    + "  pid BIGINT,\n"
                    + "  oid AS pid * 7 % 1200 + 1,\n"
                    + "  fee AS pid % 13\n"
                    + ") WITH ('connector' = 'datagen', 'rows-per-second' = '" + ROWS_PER_SECOND + "',\n"
                    + "  'fields.pid.kind' = 'sequence', 'fields.pid.start' = '1', 'fields.pid.end' = '" + PAYMENTS + "')";

    // the same data in Java
    static long k(long id) {
        return id % 17;
    }

    static long amount(long id) {
        return id * 37 % 101;
    }

    static long oid(long pid) {
        return pid * 7 % 1200 + 1;
    }

    static long fee(long pid) {
        return pid % 13;
    }

    static final AtomicInteger RUNS = new AtomicInteger();

    /** A local cluster's configuration on one backend. */
    static Configuration cluster(Configuration backend) {
        Configuration c = new Configuration(backend);
        c.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("256m"));
        c.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(200));
        c.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY,
                tmp.resolve("checkpoints-" + RUNS.incrementAndGet()).toUri().toString());
        c.set(RestartStrategyOptions.RESTART_STRATEGY, "none"); // a failure fails the test
        c.setString("table.local-time-zone", "UTC");
        return c;
    }

    static StreamExecutionEnvironment env(Configuration backend) {
        return StreamExecutionEnvironment.createLocalEnvironment(2, cluster(backend));
    }

    static Configuration sfs() {
        return TestBackends.sfsConfig(SFS_DATA);
    }

    /**
     * A changelog applied: +I/+U add a row, -U/-D remove one (which must be there); the rows
     * left, as sorted strings.
     */
    static List<String> materialize(Iterator<Row> it) {
        Map<String, Integer> rows = new HashMap<>();
        while (it.hasNext()) {
            Row r = it.next();
            RowKind kind = r.getKind();
            r.setKind(RowKind.INSERT);
            String s = r.toString();
            if (kind == RowKind.INSERT || kind == RowKind.UPDATE_AFTER) {
                rows.merge(s, 1, Integer::sum);
            } else {
                Integer n = rows.get(s);
                assertThat(n).as("retraction of a row never emitted: %s", s).isNotNull();
                if (n == 1) {
                    rows.remove(s);
                } else {
                    rows.put(s, n - 1);
                }
            }
        }
        List<String> out = new ArrayList<>();
        rows.forEach((s, n) -> out.addAll(Collections.nCopies(n, s)));
        Collections.sort(out);
        return out;
    }

    static List<String> sorted(List<Row> rows) {
        List<String> out = new ArrayList<>();
        for (Row r : rows) {
            out.add(r.toString());
        }
        Collections.sort(out);
        return out;
    }

    @SuppressWarnings("try") // CloseableIterator.close() may throw InterruptedException
    static List<String> sql(Configuration backend, String query) throws Exception {
        StreamTableEnvironment t = StreamTableEnvironment.create(env(backend), EnvironmentSettings.inStreamingMode());
        t.executeSql(DDL_ORDERS);
        t.executeSql(DDL_PAYMENTS);
        try (CloseableIterator<Row> it = t.executeSql(query).collect()) {
            return materialize(it);
        }
    }

    /** The query on sfs equals the query on hashmap equals the Java oracle. */
    static void check(String what, Function<Configuration, List<String>> job, List<String> oracle) {
        List<String> onSfs = job.apply(sfs());
        List<String> onHashmap = job.apply(TestBackends.hashmapConfig());
        assertThat(onHashmap).as("%s on hashmap vs Java", what).isEqualTo(oracle);
        assertThat(onSfs).as("%s on %s vs hashmap", what, TestBackends.sfsName()).isEqualTo(onHashmap);
    }

    static Function<Configuration, List<String>> sqlJob(String query) {
        return backend -> {
            try {
                return sql(backend, query);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        };
    }

    @Test
    void regularLeftJoin() {
        List<Row> oracle = new ArrayList<>();
        for (long id = 1; id <= ORDERS; id++) {
            boolean matched = false;
            for (long pid = 1; pid <= PAYMENTS; pid++) {
                if (oid(pid) == id) {
                    oracle.add(Row.of(id, k(id), pid, fee(pid)));
                    matched = true;
                }
            }
            if (!matched) {
                oracle.add(Row.of(id, k(id), null, null));
            }
        }
        check("left join",
                sqlJob("SELECT o.id, o.k, p.pid, p.fee FROM orders o LEFT JOIN payments p ON o.id = p.oid"),
                sorted(oracle));
    }

    @Test
    void tumblingEventTimeWindow() {
        Map<List<Long>, long[]> windows = new TreeMap<>(Comparator.comparing((List<Long> l) -> l.get(0))
                .thenComparing(l -> l.get(1)));
        for (long id = 1; id <= ORDERS; id++) {
            long start = id * 100 / 10_000 * 10_000;
            long[] agg = windows.computeIfAbsent(List.of(k(id), start), x -> new long[2]);
            agg[0]++;
            agg[1] += amount(id);
        }
        List<Row> oracle = new ArrayList<>();
        windows.forEach((kw, agg) -> oracle.add(Row.of(kw.get(0),
                LocalDateTime.ofEpochSecond(kw.get(1) / 1000, 0, ZoneOffset.UTC),
                LocalDateTime.ofEpochSecond(kw.get(1) / 1000 + 10, 0, ZoneOffset.UTC),
                agg[0], agg[1])));
        check("tumbling window",
                sqlJob("SELECT k, window_start, window_end, COUNT(*) AS c, SUM(amount) AS s\n"
                        + "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND))\n"
                        + "GROUP BY k, window_start, window_end"),
                sorted(oracle));
    }

    @Test
    void topNByRowNumber() {
        Map<Long, List<long[]>> byKey = new TreeMap<>();
        for (long id = 1; id <= ORDERS; id++) {
            byKey.computeIfAbsent(k(id), x -> new ArrayList<>()).add(new long[] {id, amount(id)});
        }
        List<Row> oracle = new ArrayList<>();
        byKey.forEach((key, rows) -> {
            rows.sort(Comparator.comparingLong((long[] r) -> -r[1]).thenComparingLong(r -> r[0]));
            for (int i = 0; i < 3; i++) {
                oracle.add(Row.of(key, rows.get(i)[0], rows.get(i)[1], (long) i + 1));
            }
        });
        check("top-3 per key",
                sqlJob("SELECT k, id, amount, rn FROM (\n"
                        + "  SELECT k, id, amount,\n"
                        + "    ROW_NUMBER() OVER (PARTITION BY k ORDER BY amount DESC, id ASC) AS rn\n"
                        + "  FROM orders)\n"
                        + "WHERE rn <= 3"),
                sorted(oracle));
    }

    // ---------------------------------------------------------------- (d) keyed event-time timers

    static final int EVENTS = 2000;

    /** Event i: key "key" + i % 7, event time i * 50 ms, value i % 10. */
    static Tuple3<String, Long, Long> event(long i) {
        return Tuple3.of("key" + i % 7, i * 50, i % 10);
    }

    static long bucketEnd(long ts) {
        return (ts / 1000 + 1) * 1000 - 1;
    }

    /**
     * Keeps each event's value under its timestamp (map state) until the event-time timer of its
     * one-second bucket fires, then emits the bucket's sum and the key's running total (value
     * state). Only events at or before the timer count, so the output does not depend on when
     * watermarks arrive.
     */
    static final class Buckets extends KeyedProcessFunction<String, Tuple3<String, Long, Long>, String>
            implements CheckpointedFunction {
        private static final long serialVersionUID = 1L;
        /** Checkpoints taken while the timers' operator ran (it and its state were live). */
        static final AtomicInteger SNAPSHOTS = new AtomicInteger();
        transient MapState<Long, Long> pending;
        transient ValueState<Long> total;

        @Override
        public void open(OpenContext ctx) {
            pending = getRuntimeContext().getMapState(new MapStateDescriptor<>("pending", Types.LONG, Types.LONG));
            total = getRuntimeContext().getState(new ValueStateDescriptor<>("total", Types.LONG));
        }

        @Override
        public void processElement(Tuple3<String, Long, Long> e, Context ctx, Collector<String> out) throws Exception {
            Long had = pending.get(e.f1);
            pending.put(e.f1, (had == null ? 0 : had) + e.f2);
            ctx.timerService().registerEventTimeTimer(bucketEnd(e.f1));
        }

        @Override
        public void onTimer(long time, OnTimerContext ctx, Collector<String> out) throws Exception {
            long sum = 0;
            List<Long> done = new ArrayList<>();
            for (Map.Entry<Long, Long> en : pending.entries()) {
                if (en.getKey() <= time) {
                    sum += en.getValue();
                    done.add(en.getKey());
                }
            }
            for (Long ts : done) {
                pending.remove(ts);
            }
            long t = (total.value() == null ? 0 : total.value()) + sum;
            total.update(t);
            out.collect(ctx.getCurrentKey() + "@" + time + " sum=" + sum + " total=" + t);
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) {
            SNAPSHOTS.incrementAndGet();
        }

        @Override
        public void initializeState(FunctionInitializationContext context) {}
    }

    @SuppressWarnings("try")
    static List<String> timersJob(Configuration backend) {
        try {
            Buckets.SNAPSHOTS.set(0);
            StreamExecutionEnvironment env = env(backend);
            DataGeneratorSource<Tuple3<String, Long, Long>> source = new DataGeneratorSource<>(
                    SqlLocalClusterTest::event, EVENTS, RateLimiterStrategy.perSecond(ROWS_PER_SECOND),
                    Types.TUPLE(Types.STRING, Types.LONG, Types.LONG));
            List<String> out = new ArrayList<>();
            // one source subtask: event time rises monotonically, no event is ever late
            try (CloseableIterator<String> it = env.fromSource(source,
                            WatermarkStrategy.<Tuple3<String, Long, Long>>forMonotonousTimestamps()
                                    .withTimestampAssigner((e, ts) -> e.f1),
                            "events")
                    .setParallelism(1)
                    .keyBy(e -> e.f0, Types.STRING)
                    .process(new Buckets())
                    .executeAndCollect()) {
                it.forEachRemaining(out::add);
            }
            assertThat(Buckets.SNAPSHOTS.get()).as("checkpoints while the timers ran").isGreaterThan(0);
            Collections.sort(out);
            return out;
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    @Test
    void keyedEventTimeTimers() {
        Map<String, TreeMap<Long, Long>> buckets = new TreeMap<>();
        for (long i = 0; i < EVENTS; i++) {
            Tuple3<String, Long, Long> e = event(i);
            buckets.computeIfAbsent(e.f0, x -> new TreeMap<>()).merge(bucketEnd(e.f1), e.f2, Long::sum);
        }
        List<String> oracle = new ArrayList<>();
        buckets.forEach((key, b) -> {
            long total = 0;
            for (Map.Entry<Long, Long> en : b.entrySet()) {
                total += en.getValue();
                oracle.add(key + "@" + en.getKey() + " sum=" + en.getValue() + " total=" + total);
            }
        });
        Collections.sort(oracle);
        check("event-time timers", SqlLocalClusterTest::timersJob, oracle);
    }
}
