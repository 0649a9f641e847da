package io.sfs.flink.state;

import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.runtime.state.internal.InternalAggregatingState;

import java.util.Collection;

/** Aggregating state: the accumulator is an sfs value; add reads, adds and writes. */
public class SfsAggregatingState<K, N, IN, ACC, OUT> extends SfsValueState<K, N, ACC>
        implements InternalAggregatingState<K, N, IN, ACC, OUT> {
    private AggregateFunction<IN, ACC, OUT> fn;

    public SfsAggregatingState(
            SfsStateContext<K> ctx,
            int id,
            TypeSerializer<N> ns,
            TypeSerializer<ACC> ser,
            AggregateFunction<IN, ACC, OUT> fn) {
        super(ctx, id, ns, ser, null);
        this.fn = fn;
    }

    public void setAggregateFunction(AggregateFunction<IN, ACC, OUT> f) {
        this.fn = f;
    }

    @Override
    public OUT get() throws Exception {
        ACC acc = get(namespace);
        return acc == null ? null : fn.getResult(acc);
    }

    @Override
    public void add(IN value) throws Exception {
        ACC acc = get(namespace);
        if (value == null) {
            clear();
            return;
        }
        acc = acc == null ? fn.createAccumulator() : acc;
        put(namespace, fn.add(value, acc));
    }

    @Override
    public ACC getInternal() throws Exception {
        return get(namespace);
    }

    @Override
    public void updateInternal(ACC value) throws Exception {
        putOrClear(value);
    }

    @Override
    public void mergeNamespaces(N target, Collection<N> sources) throws Exception {
        mergeValues(target, sources, (a, b) -> fn.merge(a, b));
    }
}
