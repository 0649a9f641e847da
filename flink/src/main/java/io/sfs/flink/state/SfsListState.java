package io.sfs.flink.state;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.runtime.state.internal.InternalListState;
import org.apache.flink.util.Preconditions;

import io.sfs.flink.jni.SfsIo;
import io.sfs.flink.jni.SfsNative;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * List state: each element is an sfs list element (append is a blind write: no read). add,
 * addAll and update are one crossing each (update two: clear, then append); get is one, its
 * answer {@code [u32 len][element]...} deserialized from the io buffer.
 */
public class SfsListState<K, N, V> extends AbstractSfsState<K, N, List<V>>
        implements InternalListState<K, N, V> {
    private TypeSerializer<V> elementSerializer;

    public SfsListState(
            SfsStateContext<K> ctx, int id, TypeSerializer<N> ns, TypeSerializer<List<V>> ser) {
        super(ctx, id, ns, ser, null);
        this.elementSerializer = ((ListSerializer<V>) ser).getElementSerializer();
    }

    @Override
    public void update(TypeSerializer<N> ns, TypeSerializer<List<V>> value, List<V> dflt) {
        super.update(ns, value, dflt);
        this.elementSerializer = ((ListSerializer<V>) value).getElementSerializer();
    }

    @Override
    public Iterable<V> get() throws Exception {
        return getInternal();
    }

    @Override
    public List<V> getInternal() throws Exception {
        return read(namespace);
    }

    /** The elements of @ns, or null when it has none. */
    private List<V> read(N ns) throws Exception {
        int total = frames(ns);
        if (total <= 0) {
            return null;
        }
        SfsIo io = io();
        List<V> out = new ArrayList<>();
        int pos = 0;
        while (pos < total) {
            int n = io.nativeInt(pos);
            out.add(elementSerializer.deserialize(io.in.over(pos + 4, pos + 4 + n)));
            pos += 4 + n;
        }
        return out;
    }

    /** The elements of @ns as frames at 0 of the io buffer: their bytes (0: none). */
    private int frames(N ns) {
        int klen = key(ns);
        long nl = nsLen();
        int n = SfsNative.listGet(h(), id, kg(), nl, klen);
        while (n <= SfsNative.NEED_BASE) {
            // the answer that did not fit overwrote the key's bytes: grow, write them again
            grow(n, 0);
            klen = key(ns);
            n = SfsNative.listGet(h(), id, kg(), nl, klen);
        }
        return n;
    }

    @Override
    public void add(V value) throws Exception {
        Preconditions.checkNotNull(value, "You cannot add null to a ListState.");
        int klen = key(namespace);
        SfsIo.Out out = io().out.at(klen + 4);
        elementSerializer.serialize(value, out);
        int n = out.position() - klen - 4;
        io().putNativeInt(klen, n);
        SfsNative.listAppend(h(), id, kg(), nsLen(), klen, n + 4);
    }

    @Override
    public void addAll(List<V> values) throws Exception {
        Preconditions.checkNotNull(values, "List of values to add cannot be null.");
        if (values.isEmpty()) {
            return;
        }
        append(namespace, values);
    }

    @Override
    public void update(List<V> values) throws Exception {
        Preconditions.checkNotNull(values, "List of values to add cannot be null.");
        for (V v : values) {
            Preconditions.checkNotNull(v, "You cannot add null to a ListState.");
        }
        clear();
        if (!values.isEmpty()) {
            append(namespace, values);
        }
    }

    @Override
    public void updateInternal(List<V> values) throws Exception {
        if (values == null || values.isEmpty()) {
            clear();
        } else {
            update(values);
        }
    }

    private void append(N ns, List<V> values) throws Exception {
        int klen = key(ns);
        SfsIo io = io();
        SfsIo.Out out = io.out.at(klen);
        for (V v : values) {
            Preconditions.checkNotNull(v, "You cannot add null to a ListState.");
            int at = out.position();
            out.skipBytesToWrite(4);
            elementSerializer.serialize(v, out);
            io.putNativeInt(at, out.position() - at - 4);
        }
        SfsNative.listAppend(h(), id, kg(), nsLen(), klen, out.position() - klen);
    }

    @Override
    public void clear() {
        int klen = key(namespace);
        SfsNative.listClear(h(), id, kg(), nsLen(), klen);
    }

    @Override
    public void mergeNamespaces(N target, Collection<N> sources) throws Exception {
        if (sources == null || sources.isEmpty()) {
            return;
        }
        for (N s : sources) {
            if (s == null) {
                continue;
            }
            int total = frames(s);
            if (total <= 0) {
                continue;
            }
            // the frames move as they are: copied aside, the target's key written, appended
            byte[] f = io().copy(0, total);
            int kl = key(s);
            SfsNative.listClear(h(), id, kg(), nsLen(), kl);
            int klen = key(target);
            io().put(klen, f, total);
            SfsNative.listAppend(h(), id, kg(), nsLen(), klen, total);
        }
    }
}
