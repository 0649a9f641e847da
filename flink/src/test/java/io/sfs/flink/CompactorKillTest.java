package io.sfs.flink;

import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.source.legacy.RichSourceFunction;
import org.apache.flink.util.CloseableIterator;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The compactor of a TaskManager's host group killed with {@code kill -9} while a job runs on
 * it: the group's supervisor starts a new one, which flushes what the workers (the task threads)
 * sealed and stages the next checkpoints, so the job goes on without a failover — checkpoints
 * complete after the kill — and its result is exactly the one Java computes (and hashmap's, in
 * {@link FailureRecoveryTest}'s pipeline).
 */
class CompactorKillTest {
    @TempDir static Path tmp;

    static final Path SFS_DATA = TestBackends.dataDir("compactor-kill");
    static final AtomicInteger COMPLETED = new AtomicInteger();

    /** Offsets [0, end), one per millisecond, the offset as operator state; counts completions. */
    @SuppressWarnings("deprecation") // a legacy source: its own thread paces the records
    static final class Paced extends RichSourceFunction<Long> implements CheckpointedFunction, CheckpointListener {
        private static final long serialVersionUID = 1L;
        final long end;
        transient ListState<Long> offsetState;
        transient long offset;
        volatile boolean running = true;

        Paced(long end) {
            this.end = end;
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            offsetState = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("offset", Types.LONG));
            for (Long o : offsetState.get()) {
                offset = o;
            }
        }

        @Override
        public void run(SourceContext<Long> ctx) throws Exception {
            while (running && offset < end) {
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(offset);
                    offset++;
                }
                Thread.sleep(1);
            }
        }

        @Override
        public void cancel() {
            running = false;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            offsetState.update(List.of(offset));
        }

        @Override
        public void notifyCheckpointComplete(long id) {
            COMPLETED.incrementAndGet();
        }
    }

    static final Pattern COMPACTOR = Pattern.compile("compactor0\\[(\\d+)\\]: attached");

    /** Pids of the group's compactors so far, oldest first, from the group logs under SFS_DATA. */
    static List<Long> compactors() throws Exception {
        List<Long> out = new ArrayList<>();
        try (Stream<Path> s = Files.walk(SFS_DATA)) {
            for (Path log : (Iterable<Path>) s.filter(p -> p.getFileName().toString().equals("sfs-host.log"))::iterator) {
                Matcher m = COMPACTOR.matcher(Files.readString(log, StandardCharsets.UTF_8));
                while (m.find()) {
                    out.add(Long.parseLong(m.group(1)));
                }
            }
        }
        return out;
    }

    @Test
    @SuppressWarnings("try") // CloseableIterator.close() may throw InterruptedException
    void killedCompactorIsReplacedAndTheJobGoesOnExactlyOnce() throws Exception {
        FailureRecoveryTest.reset();
        COMPLETED.set(0);
        Configuration c = FailureRecoveryTest.cluster(TestBackends.sfsConfig(SFS_DATA), tmp.resolve("checkpoints"));
        c.set(RestartStrategyOptions.RESTART_STRATEGY, "none"); // a failover would fail the test
        c.set(SfsOptions.STAGE_TIMEOUT_MS, 30_000L); // a compactor that never comes back fails it soon
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(2, c);
        env.setMaxParallelism(128);
        @SuppressWarnings("deprecation") // a legacy source: its own thread paces the records
        var numbers = env.addSource(new Paced(FailureRecoveryTest.RECORDS), "numbers", Types.LONG);

        int[] atKill = {-1};
        long[] killed = {-1};
        Thread killer = new Thread(() -> {
            try {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (COMPLETED.get() < 2 && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                List<Long> pids = compactors();
                if (pids.isEmpty()) {
                    return;
                }
                killed[0] = pids.get(pids.size() - 1);
                atKill[0] = COMPLETED.get();
                new ProcessBuilder("kill", "-9", Long.toString(killed[0])).start().waitFor();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "compactor-killer");
        killer.start();

        List<String> out = new ArrayList<>();
        try (CloseableIterator<String> it = numbers.setParallelism(1)
                .map(i -> Tuple2.of("k" + i % FailureRecoveryTest.KEYS, i), Types.TUPLE(Types.STRING, Types.LONG))
                .keyBy(t -> t.f0, Types.STRING)
                .process(new FailureRecoveryTest.SumAtEnd())
                .executeAndCollect()) {
            it.forEachRemaining(out::add);
        }
        killer.join();
        Collections.sort(out);

        assertThat(killed[0]).as("a compactor was killed").isPositive();
        List<Long> pids = compactors();
        assertThat(pids).as("the supervisor started a new compactor after %d", killed[0])
                .hasSizeGreaterThanOrEqualTo(2)
                .last().isNotEqualTo(killed[0]);
        assertThat(COMPLETED.get()).as("checkpoints completed after the kill (%d before it)", atKill[0])
                .isGreaterThanOrEqualTo(atKill[0] + 2);
        assertThat(out).as("the sums, exactly once").isEqualTo(FailureRecoveryTest.expected());
    }
}
