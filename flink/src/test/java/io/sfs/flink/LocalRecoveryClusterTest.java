package io.sfs.flink;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A task failure injected mid-run on a local cluster with Flink's local recovery on: the job
 * restarts on the same TaskManager, sfs takes its slots back in place (no file read), and the
 * result is exactly once — equal to the closed form, which is also what the HashMap backend
 * computes (SqlLocalClusterTest compares the backends row for row).
 */
class LocalRecoveryClusterTest {
    @TempDir static Path tmp;

    static final long EVENTS = 6000;
    static final AtomicBoolean FAILED = new AtomicBoolean();
    static volatile boolean checkpointed;

    /** Fails once, after a checkpoint has completed. */
    static final class FailOnce extends RichMapFunction<Long, Long> implements CheckpointListener {
        @Override
        public Long map(Long v) {
            if (checkpointed && v > EVENTS / 2 && FAILED.compareAndSet(false, true)) {
                throw new RuntimeException("injected failure at " + v);
            }
            return v;
        }

        @Override
        public void notifyCheckpointComplete(long id) {
            checkpointed = true;
        }
    }

    /** Per key: sum and count, emitted once at the end of input. */
    static final class Sum extends KeyedProcessFunction<Long, Long, String> {
        transient ValueState<Long> sum;
        transient ValueState<Long> count;

        @Override
        public void open(OpenContext ctx) {
            sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Types.LONG));
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(Long v, Context ctx, Collector<String> out) throws Exception {
            Long s = sum.value();
            Long c = count.value();
            if (c == null) {
                ctx.timerService().registerEventTimeTimer(Long.MAX_VALUE - 1);
            }
            sum.update((s == null ? 0 : s) + v);
            count.update((c == null ? 0 : c) + 1);
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<String> out) throws Exception {
            out.collect(ctx.getCurrentKey() + ":" + sum.value() + ":" + count.value());
        }
    }

    static List<String> expected() {
        long[] sum = new long[97];
        long[] cnt = new long[97];
        for (long v = 0; v < EVENTS; v++) {
            sum[(int) (v % 97)] += v;
            cnt[(int) (v % 97)]++;
        }
        List<String> out = new ArrayList<>();
        for (int k = 0; k < 97; k++) {
            out.add(k + ":" + sum[k] + ":" + cnt[k]);
        }
        Collections.sort(out);
        return out;
    }

    @Test
    void failureRestoresInPlaceExactlyOnce() throws Exception {
        Configuration c = new Configuration(TestBackends.sfsConfig(TestBackends.dataDir("local-recovery")));
        c.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("256m"));
        c.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(200));
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, tmp.resolve("checkpoints").toUri().toString());
        c.set(StateRecoveryOptions.LOCAL_RECOVERY, true);
        c.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        c.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 3);
        c.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(100));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(2, c);
        DataGeneratorSource<Long> source = new DataGeneratorSource<>(
                v -> v, EVENTS, RateLimiterStrategy.perSecond(1500), Types.LONG);
        long before = SfsHostGroup.LOCAL_RESTORES.get();
        List<String> got = new ArrayList<>();
        try (CloseableIterator<String> it = env.fromSource(source,
                        WatermarkStrategy.<Long>forMonotonousTimestamps().withTimestampAssigner((v, t) -> v),
                        "numbers")
                .map(new FailOnce())
                .keyBy(v -> v % 97)
                .process(new Sum())
                .executeAndCollect()) {
            it.forEachRemaining(got::add);
        }
        Collections.sort(got);
        assertThat(FAILED.get()).as("the failure was injected").isTrue();
        assertThat(got).isEqualTo(expected());
        if (TestBackends.sfsPresent()) {
            assertThat(SfsHostGroup.LOCAL_RESTORES.get() - before)
                    .as("subtasks restored in place").isGreaterThanOrEqualTo(1);
        }
    }
}
