package io.sfs.flink;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.runtime.operators.testutils.MockEnvironment;
import org.apache.flink.runtime.operators.testutils.MockEnvironmentBuilder;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;

/** getKeys and getKeysAndNamespaces see the live state: written, cleared, across a checkpoint. */
class KeysTest {

    @Test
    void keysAndNamespacesOfEveryKind(@TempDir Path tmp) throws Exception {
        try (MockEnvironment env = new MockEnvironmentBuilder().build()) {
            AbstractKeyedStateBackend<String> b = TtlTest.backend(tmp, env);
            try {
                ValueStateDescriptor<String> vd = new ValueStateDescriptor<>("v", Types.STRING);
                MapStateDescriptor<String, Long> md = new MapStateDescriptor<>("m", Types.STRING, Types.LONG);
                ListStateDescriptor<Long> ld = new ListStateDescriptor<>("l", Types.LONG);
                Set<Tuple2<String, Long>> expectV = new HashSet<>();
                Set<Tuple2<String, Long>> expectM = new HashSet<>();
                for (int i = 0; i < 300; i++) {
                    long ns = i % 3;
                    b.setCurrentKey("k" + i);
                    ValueState<String> v = b.getPartitionedState(ns, LongSerializer.INSTANCE, vd);
                    v.update("x" + i);
                    expectV.add(Tuple2.of("k" + i, ns));
                    if (i % 2 == 0) {
                        MapState<String, Long> m = b.getPartitionedState(ns, LongSerializer.INSTANCE, md);
                        m.put("a", (long) i);
                        m.put("b", (long) i);
                        expectM.add(Tuple2.of("k" + i, ns));
                    }
                    ListState<Long> l = b.getPartitionedState(7L, LongSerializer.INSTANCE, ld);
                    l.add((long) i);
                }
                TtlTest.checkpoint(b, 1); // flushed and staged; the clears below come after
                for (int i = 0; i < 300; i += 10) {
                    b.setCurrentKey("k" + i);
                    b.getPartitionedState((long) (i % 3), LongSerializer.INSTANCE, vd).clear();
                    expectV.remove(Tuple2.of("k" + i, (long) (i % 3)));
                }
                assertThat(b.<Long>getKeysAndNamespaces("v").collect(Collectors.toSet())).isEqualTo(expectV);
                assertThat(b.<Long>getKeysAndNamespaces("m").collect(Collectors.toSet())).isEqualTo(expectM);
                assertThat(b.getKeys("v", 1L).collect(Collectors.toSet()))
                        .isEqualTo(expectV.stream().filter(t -> t.f1 == 1L).map(t -> t.f0).collect(Collectors.toSet()));
                assertThat(b.getKeys("l", 7L).count()).isEqualTo(300);
                assertThat(b.getKeys("l", 8L).count()).isZero();
            } finally {
                b.dispose();
            }
        }
    }
}
