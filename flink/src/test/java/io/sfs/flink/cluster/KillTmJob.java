package io.sfs.flink.cluster;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;

/**
 * The job of {@code flink/cluster/test_tm_kill.sh}: a bounded, throttled, keyed sum whose result
 * is known in closed form, submitted to a standalone cluster whose TaskManagers carry this
 * module's classes on their classpath (so no jar is shipped).
 *
 * <p>{@code fromSequence(0, n-1)} (a checkpointed source) → a throttle (sleeps 1 ms every
 * {@code every} records, so the run lasts long enough to kill a TaskManager in it) →
 * {@code keyBy(x % 97)} → per key a {@link ValueState} sum and a {@link MapState} count per
 * {@code x % 3} → at the end of input (the final watermark fires a timer at
 * {@code Long.MAX_VALUE - 1}) one line per key: {@code key sum c0 c1 c2}. The sink writes
 * every line a subtask attempt emits to its own file, {@code part-<subtask>-<attempt>}, so a
 * line emitted twice (by a failed attempt and by its successor) is seen by the checker
 * ({@link KillTmCheck}).
 *
 * <p>Prints {@code JOB <id>} once submitted, then {@code FINISHED} when the job ends well.
 *
 * <p>Usage: {@code KillTmJob host restPort outDir n parallelism every}
 */
public final class KillTmJob {
    static final int KEYS = 97;
    static final int BUCKETS = 3;

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: KillTmJob host restPort outDir n parallelism every");
            System.exit(2);
        }
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        String outDir = args[2];
        long n = Long.parseLong(args[3]);
        int parallelism = Integer.parseInt(args[4]);
        int every = Integer.parseInt(args[5]);
        Files.createDirectories(Paths.get(outDir));

        StreamExecutionEnvironment env = StreamExecutionEnvironment.createRemoteEnvironment(host, port);
        env.setParallelism(parallelism);
        env.enableCheckpointing(500);
        env.fromSequence(0, n - 1)
                .name("sequence")
                .map(new Throttle(every))
                .name("throttle")
                .keyBy(x -> x % KEYS, Types.LONG)
                .process(new SumPerKey())
                .name("sum-per-key")
                .sinkTo(new LineFileSink(outDir))
                .name("lines");
        JobClient client = env.executeAsync("sfs-kill-tm");
        System.out.println("JOB " + client.getJobID());
        System.out.flush();
        client.getJobExecutionResult().get();
        System.out.println("FINISHED");
    }

    /** Sleeps 1 ms every {@code every} records: paces the run, changes no record. */
    static final class Throttle implements MapFunction<Long, Long> {
        private static final long serialVersionUID = 1L;
        private final int every;
        private transient long seen;

        Throttle(int every) {
            this.every = every;
        }

        @Override
        public Long map(Long x) throws Exception {
            if (++seen % every == 0) {
                Thread.sleep(1);
            }
            return x;
        }
    }

    /** Per key: the sum of its records (value state), their count by x % 3 (map state). */
    static final class SumPerKey extends KeyedProcessFunction<Long, Long, String> {
        private static final long serialVersionUID = 1L;
        private transient ValueState<Long> sum;
        private transient MapState<Integer, Long> counts;

        @Override
        public void open(OpenContext ctx) {
            sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Types.LONG));
            counts = getRuntimeContext()
                    .getMapState(new MapStateDescriptor<>("counts", Types.INT, Types.LONG));
        }

        @Override
        public void processElement(Long x, Context ctx, Collector<String> out) throws Exception {
            Long s = sum.value();
            if (s == null) {
                s = 0L;
                // once per key: the final watermark (Long.MAX_VALUE) at the end of input fires it
                ctx.timerService().registerEventTimeTimer(Long.MAX_VALUE - 1);
            }
            sum.update(s + x);
            int b = (int) (x % BUCKETS);
            Long c = counts.get(b);
            counts.put(b, c == null ? 1L : c + 1);
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<String> out) throws Exception {
            StringBuilder line = new StringBuilder();
            line.append(ctx.getCurrentKey()).append(' ').append(sum.value());
            for (int b = 0; b < BUCKETS; b++) {
                Long c = counts.get(b);
                line.append(' ').append(c == null ? 0 : c);
            }
            out.collect(line.toString());
        }
    }

    /**
     * Each subtask attempt appends its lines to {@code outDir/part-<subtask>-<attempt>},
     * flushed at every checkpoint and at the end of input. Not a transactional sink: the job
     * emits only at the end of input, and the checker counts every line of every attempt.
     */
    static final class LineFileSink implements Sink<String> {
        private static final long serialVersionUID = 1L;
        private final String outDir;

        LineFileSink(String outDir) {
            this.outDir = outDir;
        }

        @Override
        public SinkWriter<String> createWriter(WriterInitContext ctx) throws IOException {
            Path f = Paths.get(outDir, "part-" + ctx.getTaskInfo().getIndexOfThisSubtask()
                    + "-" + ctx.getTaskInfo().getAttemptNumber());
            BufferedWriter w = Files.newBufferedWriter(f, StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            return new SinkWriter<>() {
                @Override
                public void write(String line, Context c) throws IOException {
                    w.write(line);
                    w.newLine();
                }

                @Override
                public void flush(boolean endOfInput) throws IOException {
                    w.flush();
                }

                @Override
                public void close() throws IOException {
                    w.close();
                }
            };
        }
    }
}
