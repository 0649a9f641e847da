package io.sfs.flink.state;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.runtime.state.internal.InternalValueState;

import io.sfs.flink.jni.SfsIo;
import io.sfs.flink.jni.SfsNative;

import java.io.IOException;

/** Value state: one sfs value per key and namespace. One JNI crossing per call. */
public class SfsValueState<K, N, V> extends AbstractSfsState<K, N, V>
        implements InternalValueState<K, N, V> {

    public SfsValueState(
            SfsStateContext<K> ctx, int id, TypeSerializer<N> ns, TypeSerializer<V> ser, V dflt) {
        super(ctx, id, ns, ser, dflt);
    }

    @Override
    public V value() throws IOException {
        V v = get(namespace);
        return v != null ? v : copyDefault();
    }

    @Override
    public void update(V value) throws IOException {
        if (value == null) {
            clear();
            return;
        }
        put(namespace, value);
    }

    @Override
    public void clear() {
        int klen = key(namespace);
        SfsNative.valueDelete(h(), id, kg(), nsLen(), klen);
    }

    /** The stored value of namespace @ns, or null. */
    final V get(N ns) throws IOException {
        int klen = key(ns);
        long nl = nsLen();
        int n = SfsNative.valueGet(h(), id, kg(), nl, klen);
        while (n <= SfsNative.NEED_BASE) {
            grow(n, klen);
            n = SfsNative.valueGet(h(), id, kg(), nl, klen);
        }
        if (n == SfsNative.ABSENT) {
            return null;
        }
        return valueSerializer.deserialize(io().in.over(0, n));
    }

    final void put(N ns, V value) throws IOException {
        int klen = key(ns);
        SfsIo.Out out = io().out.at(klen);
        valueSerializer.serialize(value, out);
        SfsNative.valuePut(h(), id, kg(), nsLen(), klen, out.position() - klen);
    }

    /** A merge of two stored values (a reduce function's, an aggregate's merge). */
    interface Merge<V> {
        V merge(V a, V b) throws Exception;
    }

    /**
     * mergeNamespaces of a reducing or aggregating state: every source's value folded with
     * @merge into the target's, the sources deleted. Two crossings per source that has one.
     */
    final void mergeValues(N target, java.util.Collection<N> sources, Merge<V> merge) throws Exception {
        if (sources == null || sources.isEmpty()) {
            return;
        }
        V acc = null;
        for (N s : sources) {
            if (s == null) {
                continue;
            }
            V v = get(s);
            if (v != null) {
                delete(s);
                acc = acc == null ? v : merge.merge(acc, v);
            }
        }
        if (acc != null) {
            V t = get(target);
            put(target, t == null ? acc : merge.merge(t, acc));
        }
    }

    /** updateInternal of a reducing or aggregating state: a put, or a clear for null. */
    final void putOrClear(V value) throws Exception {
        if (value == null) {
            clear();
        } else {
            put(namespace, value);
        }
    }

    final void delete(N ns) {
        int klen = key(ns);
        SfsNative.valueDelete(h(), id, kg(), nsLen(), klen);
    }
}
