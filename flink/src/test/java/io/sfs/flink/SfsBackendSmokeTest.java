package io.sfs.flink;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.apache.flink.util.Collector;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** The backend end to end in one operator: value, list and map state, a checkpoint, a restore. */
class SfsBackendSmokeTest {

    static class Counter extends KeyedProcessFunction<String, String, String> {
        transient ValueState<Long> count;
        transient ListState<String> seen;
        transient MapState<String, Long> per;

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
            seen = getRuntimeContext().getListState(new ListStateDescriptor<>("seen", Types.STRING));
            per = getRuntimeContext().getMapState(new MapStateDescriptor<>("per", Types.STRING, Types.LONG));
        }

        @Override
        public void processElement(String v, Context ctx, Collector<String> out) throws Exception {
            Long c = count.value();
            c = c == null ? 1 : c + 1;
            count.update(c);
            seen.add(v);
            Long p = per.get(v);
            per.put(v, p == null ? 1 : p + 1);
            List<String> all = new ArrayList<>();
            seen.get().forEach(all::add);
            out.collect(ctx.getCurrentKey() + ":" + c + ":" + all.size() + ":" + per.get(v));
        }
    }

    /**
     * The backend of these unit tests: one host group per test JVM, its files under
     * target/sfs-test-data (not a test's temporary directory, which JUnit deletes while the
     * group, which lives as long as the JVM, still writes there). @ignored: kept for callers.
     */
    static SfsStateBackend backend(Path ignored) {
        return new SfsStateBackend()
                .setBinDir(TestBackends.binDir())
                .setDataDir(SHARED_DIR.toString());
    }

    static final Path SHARED_DIR = TestBackends.dataDir("unit");

    static KeyedOneInputStreamOperatorTestHarness<String, String, String> harness(Path tmp) throws Exception {
        KeyedOneInputStreamOperatorTestHarness<String, String, String> h =
                new KeyedOneInputStreamOperatorTestHarness<>(
                        new KeyedProcessOperator<>(new Counter()), v -> v.substring(0, 1), Types.STRING);
        h.setStateBackend(backend(tmp));
        return h;
    }

    @Test
    void writesReadsCheckpointsAndRestores(@TempDir Path tmp) throws Exception {
        OperatorSubtaskState snap;
        try (KeyedOneInputStreamOperatorTestHarness<String, String, String> h = harness(tmp)) {
            h.open();
            h.processElement("a1", 1);
            h.processElement("a2", 2);
            h.processElement("b1", 3);
            h.processElement("a1", 4);
            assertThat(h.extractOutputValues()).containsExactly("a:1:1:1", "a:2:2:1", "b:1:1:1", "a:3:3:2");
            snap = h.snapshot(1, 5);
            h.processElement("b9", 6); // after the checkpoint: must not survive the restore
        }
        try (KeyedOneInputStreamOperatorTestHarness<String, String, String> h = harness(tmp)) {
            h.initializeState(snap);
            h.open();
            h.processElement("a1", 7);
            h.processElement("b1", 8);
            assertThat(h.extractOutputValues()).containsExactly("a:4:4:3", "b:2:2:2");
        }
    }
}
