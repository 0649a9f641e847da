package io.sfs.flink.state;

import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.runtime.state.internal.InternalReducingState;

import java.util.Collection;

/**
 * Reducing state over a value: add reads, reduces and writes (two crossings). A blind merge
 * would need the reduce function inside sfs; a counter of Flink's is not one of sfs's merges.
 */
public class SfsReducingState<K, N, V> extends SfsValueState<K, N, V>
        implements InternalReducingState<K, N, V> {
    private ReduceFunction<V> reduce;

    public SfsReducingState(
            SfsStateContext<K> ctx,
            int id,
            TypeSerializer<N> ns,
            TypeSerializer<V> ser,
            ReduceFunction<V> reduce) {
        super(ctx, id, ns, ser, null);
        this.reduce = reduce;
    }

    public void setReduceFunction(ReduceFunction<V> f) {
        this.reduce = f;
    }

    @Override
    public V get() throws Exception {
        return get(namespace);
    }

    @Override
    public void add(V value) throws Exception {
        if (value == null) {
            clear();
            return;
        }
        V cur = get(namespace);
        put(namespace, cur == null ? value : reduce.reduce(cur, value));
    }

    @Override
    public V getInternal() throws Exception {
        return get(namespace);
    }

    @Override
    public void updateInternal(V value) throws Exception {
        putOrClear(value);
    }

    @Override
    public void mergeNamespaces(N target, Collection<N> sources) throws Exception {
        mergeValues(target, sources, (a, b) -> reduce.reduce(a, b));
    }
}
