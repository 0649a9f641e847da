package io.sfs.flink;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.source.legacy.RichSourceFunction;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;
import org.apache.flink.util.ExceptionUtils;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A DataStream job (a source, a map at parallelism 2, a keyed sum in value state emitted by an
 * event-time timer at the end of input) that fails and recovers, on sfs and on hashmap:
 *
 * <ul>
 *   <li>the map throws once after a checkpoint has completed; the job restarts from it and the
 *       sums are exactly-once;
 *   <li>a job at parallelism 2 stops with an error after a checkpoint (retained), and a job at
 *       parallelism 3 resumes from that checkpoint: the keyed state is rescaled;
 *   <li>a job fails again and again, each time after a checkpoint completed, and restores from
 *       files each time in a host group of two worker slots: the slots are reused.
 * </ul>
 *
 * <p>The source pauses at a fixed offset until a checkpoint taken there has completed, so the
 * failure always comes after a checkpoint that holds half of the state — no sleeps, no races.
 * Each run also checks the failure and the restore really happened.
 */
class FailureRecoveryTest {
    /** Checkpoints. */
    @TempDir static Path tmp;

    /** One sfs host group for the whole class, as one TaskManager has one. */
    static final Path SFS_DATA = TestBackends.dataDir("failure-recovery");

    static final long RECORDS = 4000;
    static final int KEYS = 13;

    // what the jobs did, for the checks (one job runs at a time)
    static final AtomicBoolean PAUSE_CHECKPOINTED = new AtomicBoolean();
    static final AtomicBoolean MAP_FAILED = new AtomicBoolean();
    static final AtomicLong RESTORED_OFFSET = new AtomicLong(-1);
    static final AtomicInteger RESTORES = new AtomicInteger();

    static void reset() {
        PAUSE_CHECKPOINTED.set(false);
        MAP_FAILED.set(false);
        RESTORED_OFFSET.set(-1);
        RESTORES.set(0);
    }

    /** The stop of the rescale test's first job: it fails on purpose. */
    static final class StopAfterCheckpoint extends RuntimeException {
        private static final long serialVersionUID = 1L;

        StopAfterCheckpoint() {
            super("stop after a completed checkpoint (on purpose)");
        }
    }

    /**
     * Emits offsets [offset, end); at {@code pauseAt} waits until a checkpoint taken there has
     * completed, then continues, or throws {@link StopAfterCheckpoint} when {@code stopAtPause}.
     * Its offset is operator state, so a restarted or resumed job continues where it stopped.
     */
    @SuppressWarnings("deprecation") // a legacy source: its own thread may block on a checkpoint
    static final class Numbers extends RichSourceFunction<Long>
            implements CheckpointedFunction, CheckpointListener {
        private static final long serialVersionUID = 1L;
        final long end;
        final long pauseAt;
        final boolean stopAtPause;
        transient ListState<Long> offsetState;
        transient long offset;
        transient long checkpointAtPause;
        volatile boolean running = true;

        Numbers(long end, long pauseAt, boolean stopAtPause) {
            this.end = end;
            this.pauseAt = pauseAt;
            this.stopAtPause = stopAtPause;
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            offsetState = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("offset", Types.LONG));
            offset = 0;
            checkpointAtPause = -1;
            if (ctx.isRestored()) {
                for (Long o : offsetState.get()) {
                    offset = o;
                }
                RESTORED_OFFSET.set(offset);
                RESTORES.incrementAndGet();
            }
        }

        @Override
        public void run(SourceContext<Long> ctx) throws Exception {
            while (running && offset < end) {
                if (offset == pauseAt && !PAUSE_CHECKPOINTED.get()) {
                    while (running && !PAUSE_CHECKPOINTED.get()) {
                        Thread.sleep(5);
                    }
                    if (stopAtPause) {
                        throw new StopAfterCheckpoint();
                    }
                }
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(offset);
                    offset++;
                }
            }
        }

        @Override
        public void cancel() {
            running = false;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            offsetState.update(List.of(offset));
            if (offset == pauseAt && checkpointAtPause < 0) {
                checkpointAtPause = ctx.getCheckpointId();
            }
        }

        @Override
        public void notifyCheckpointComplete(long id) {
            if (checkpointAtPause >= 0 && id >= checkpointAtPause) {
                PAUSE_CHECKPOINTED.set(true);
            }
        }
    }

    /** Record i: key "k" + i % KEYS, value i; throws once on failAt (after the pause's checkpoint). */
    static final class ToKeyed extends RichMapFunction<Long, Tuple2<String, Long>> {
        private static final long serialVersionUID = 1L;
        final long failAt;

        ToKeyed(long failAt) {
            this.failAt = failAt;
        }

        @Override
        public Tuple2<String, Long> map(Long i) {
            if (i == failAt && PAUSE_CHECKPOINTED.get() && !MAP_FAILED.getAndSet(true)) {
                throw new IllegalStateException("injected failure at record " + i);
            }
            return Tuple2.of("k" + i % KEYS, i);
        }
    }

    /** A sum per key in value state, emitted once, when the end of input fires its timer. */
    static final class SumAtEnd extends KeyedProcessFunction<String, Tuple2<String, Long>, String> {
        private static final long serialVersionUID = 1L;
        transient ValueState<Long> sum;
        transient ValueState<Long> count;

        @Override
        public void open(OpenContext ctx) {
            sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Types.LONG));
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(Tuple2<String, Long> e, Context ctx, Collector<String> out) throws Exception {
            sum.update((sum.value() == null ? 0 : sum.value()) + e.f1);
            count.update((count.value() == null ? 0 : count.value()) + 1);
            ctx.timerService().registerEventTimeTimer(Long.MAX_VALUE);
        }

        @Override
        public void onTimer(long time, OnTimerContext ctx, Collector<String> out) throws Exception {
            out.collect(ctx.getCurrentKey() + " sum=" + sum.value() + " count=" + count.value());
        }
    }

    static List<String> expected() {
        Map<String, long[]> m = new TreeMap<>();
        for (long i = 0; i < RECORDS; i++) {
            long[] a = m.computeIfAbsent("k" + i % KEYS, x -> new long[2]);
            a[0] += i;
            a[1]++;
        }
        List<String> out = new ArrayList<>();
        m.forEach((k, a) -> out.add(k + " sum=" + a[0] + " count=" + a[1]));
        Collections.sort(out);
        return out;
    }

    static Configuration cluster(Configuration backend, Path checkpoints) {
        Configuration c = new Configuration(backend);
        c.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("256m"));
        c.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(200));
        c.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, checkpoints.toUri().toString());
        return c;
    }

    /** Source (1) → map (parallelism) → keyed sum (parallelism) → collect; uids fixed for restore. */
    static List<String> run(Configuration conf, int parallelism, Numbers source, long failAt) throws Exception {
        return run(conf, parallelism, source, new ToKeyed(failAt));
    }

    /** The same with the map @toKeyed (record → (key, value); it may fail on purpose). */
    @SuppressWarnings("try") // CloseableIterator.close() may throw InterruptedException
    static List<String> run(Configuration conf, int parallelism, Numbers source,
            RichMapFunction<Long, Tuple2<String, Long>> toKeyed) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(parallelism, conf);
        env.setMaxParallelism(128);
        @SuppressWarnings("deprecation") // a legacy source: its own thread may block on a checkpoint
        var numbers = env.addSource(source, "numbers", Types.LONG);
        List<String> out = new ArrayList<>();
        try (CloseableIterator<String> it = numbers.setParallelism(1).uid("numbers")
                .map(toKeyed).uid("to-keyed")
                .keyBy(t -> t.f0, Types.STRING)
                .process(new SumAtEnd()).uid("sums")
                .executeAndCollect()) {
            it.forEachRemaining(out::add);
        }
        Collections.sort(out);
        return out;
    }

    /** The map fails once after a checkpoint; the restarted job's sums are exactly-once. */
    static List<String> failOnce(Configuration backend, String name) throws Exception {
        reset();
        Configuration c = cluster(backend, tmp.resolve("fail-once-" + name));
        c.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        c.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 1);
        c.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(100));
        long half = RECORDS / 2;
        List<String> out = run(c, 2, new Numbers(RECORDS, half, false), half + 10);
        assertThat(MAP_FAILED.get()).as("%s: the map failed", name).isTrue();
        assertThat(RESTORES.get()).as("%s: restarts from a checkpoint", name).isEqualTo(1);
        assertThat(RESTORED_OFFSET.get()).as("%s: restored source offset", name)
                .isBetween(half, half + 10);
        return out;
    }

    @Test
    void mapFailsOnceAfterCheckpointAndResultIsExactlyOnce() throws Exception {
        List<String> onSfs = failOnce(TestBackends.sfsConfig(SFS_DATA), "sfs");
        List<String> onHashmap = failOnce(TestBackends.hashmapConfig(), "hashmap");
        assertThat(onHashmap).as("hashmap vs Java").isEqualTo(expected());
        assertThat(onSfs).as("%s vs hashmap", TestBackends.sfsName()).isEqualTo(onHashmap);
    }

    static final int FAILOVERS = 6;
    static final AtomicInteger FAILURES = new AtomicInteger();

    /**
     * Record i, one per millisecond, as ("k" + i % KEYS, i); fails (up to FAILOVERS times in all)
     * once a checkpoint has completed since this incarnation started, so every restart restores
     * from a checkpoint that holds part of the input.
     */
    static final class FailAfterEachCheckpoint extends RichMapFunction<Long, Tuple2<String, Long>>
            implements CheckpointListener {
        private static final long serialVersionUID = 1L;
        transient volatile boolean checkpointed;

        @Override
        public Tuple2<String, Long> map(Long i) throws Exception {
            Thread.sleep(1);
            if (checkpointed && FAILURES.get() < FAILOVERS) {
                FAILURES.incrementAndGet();
                throw new IllegalStateException("injected failure " + FAILURES.get() + " at record " + i);
            }
            return Tuple2.of("k" + i % KEYS, i);
        }

        @Override
        public void notifyCheckpointComplete(long id) {
            checkpointed = true;
        }
    }

    static List<String> failOften(Configuration backend, String name) throws Exception {
        reset();
        FAILURES.set(0);
        PAUSE_CHECKPOINTED.set(true); // the source does not pause
        Configuration c = cluster(backend, tmp.resolve("fail-often-" + name));
        c.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        c.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, FAILOVERS);
        c.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(50));
        List<String> out = run(c, 1, new Numbers(RECORDS, -1, false), new FailAfterEachCheckpoint());
        assertThat(FAILURES.get()).as("%s: failures", name).isEqualTo(FAILOVERS);
        assertThat(RESTORES.get()).as("%s: restores from a checkpoint", name).isEqualTo(FAILOVERS);
        return out;
    }

    /** Six restores from files, one keyed subtask at a time, in a host group of two slots. */
    @Test
    void manyFailoversRestoreFromFilesInTwoSlots() throws Exception {
        Configuration sfs = TestBackends.sfsConfig(TestBackends.dataDir("two-slots"));
        sfs.set(SfsOptions.SLOTS, 2);
        long adopted = SfsHostGroup.ADOPTED_RESTORES.get(), written = SfsHostGroup.WRITTEN_RESTORES.get();
        List<String> onSfs = failOften(sfs, "sfs");
        // every restore is of the subtask that wrote the files: the compactor adopts them
        assertThat(SfsHostGroup.ADOPTED_RESTORES.get() - adopted).as("restores that adopted the files").isPositive();
        assertThat(SfsHostGroup.WRITTEN_RESTORES.get() - written).as("restores that wrote entries back").isZero();
        List<String> onHashmap = failOften(TestBackends.hashmapConfig(), "hashmap");
        assertThat(onHashmap).as("hashmap vs Java").isEqualTo(expected());
        assertThat(onSfs).as("%s vs hashmap", TestBackends.sfsName()).isEqualTo(onHashmap);
    }

    /** The newest retained checkpoint under dir: the chk-N with the largest N that has _metadata. */
    static Path latestCheckpoint(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            Optional<Path> chk = s.filter(p -> p.getFileName().toString().equals("_metadata"))
                    .map(Path::getParent)
                    .filter(p -> p.getFileName().toString().startsWith("chk-"))
                    .max(Comparator.comparingLong(p -> Long.parseLong(p.getFileName().toString().substring(4))));
            assertThat(chk).as("a retained checkpoint under %s", dir).isPresent();
            return chk.get();
        }
    }

    /**
     * Half of the input at parallelism 2, a checkpoint, a stop with an error (retained
     * checkpoint); then the job resumed from that checkpoint at parallelism 3 takes the rest.
     */
    static List<String> rescale(Configuration backend, String name) throws Exception {
        reset();
        long half = RECORDS / 2;
        Path checkpoints = tmp.resolve("rescale-" + name);
        Configuration first = cluster(backend, checkpoints);
        first.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        first.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        assertThatThrownBy(() -> run(first, 2, new Numbers(RECORDS, half, true), -1))
                .as("%s: the first job stops with the source's error", name)
                .satisfies(e -> assertThat(ExceptionUtils.findThrowable(e, StopAfterCheckpoint.class))
                        .as("StopAfterCheckpoint in %s", ExceptionUtils.stringifyException(e))
                        .isPresent());
        Path chk = latestCheckpoint(checkpoints);

        reset();
        PAUSE_CHECKPOINTED.set(true); // the resumed source does not pause again
        Configuration second = cluster(backend, tmp.resolve("rescale-" + name + "-resumed"));
        second.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        second.set(StateRecoveryOptions.SAVEPOINT_PATH, chk.toUri().toString());
        // the collect sink has no uid of ours: its state may stay unclaimed, the rest is by uid
        second.set(StateRecoveryOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE, true);
        List<String> out = run(second, 3, new Numbers(RECORDS, half, true), -1);
        assertThat(RESTORED_OFFSET.get()).as("%s: resumed at the checkpoint's offset", name).isEqualTo(half);
        return out;
    }

    @Test
    void stopAfterCheckpointThenResumeAtParallelism3() throws Exception {
        long adopted = SfsHostGroup.ADOPTED_RESTORES.get(), written = SfsHostGroup.WRITTEN_RESTORES.get();
        List<String> onSfs = rescale(TestBackends.sfsConfig(SFS_DATA), "sfs");
        // other key-group ranges: every restore reads the entries and writes back its own
        assertThat(SfsHostGroup.WRITTEN_RESTORES.get() - written).as("restores that wrote entries back").isPositive();
        assertThat(SfsHostGroup.ADOPTED_RESTORES.get() - adopted).as("restores that adopted the files").isZero();
        List<String> onHashmap = rescale(TestBackends.hashmapConfig(), "hashmap");
        assertThat(onHashmap).as("hashmap vs Java").isEqualTo(expected());
        assertThat(onSfs).as("%s vs hashmap", TestBackends.sfsName()).isEqualTo(onHashmap);
    }
}
