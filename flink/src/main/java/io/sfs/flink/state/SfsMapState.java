package io.sfs.flink.state;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.runtime.state.internal.InternalMapState;

import io.sfs.flink.jni.SfsIo;
import io.sfs.flink.jni.SfsNative;

import java.util.AbstractMap;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * Map state: each user key is an sfs map entry of the key and namespace. A user key is stored
 * behind one marker byte (sfs refuses an empty user key, and a serializer may write none); a
 * value behind a null flag (Flink's map state holds null values). get, put, remove, contains
 * are one crossing; an iteration is one crossing that answers every entry, deserialized into a
 * list the iterator walks (removal through the iterator is one crossing per entry).
 */
public class SfsMapState<K, N, UK, UV> extends AbstractSfsState<K, N, Map<UK, UV>>
        implements InternalMapState<K, N, UK, UV> {
    private static final byte MARK = 1;
    private TypeSerializer<UK> userKeySerializer;
    private TypeSerializer<UV> userValueSerializer;

    public SfsMapState(
            SfsStateContext<K> ctx, int id, TypeSerializer<N> ns, TypeSerializer<Map<UK, UV>> ser) {
        super(ctx, id, ns, ser, null);
        setSerializers(ser);
    }

    private void setSerializers(TypeSerializer<Map<UK, UV>> ser) {
        MapSerializer<UK, UV> m = (MapSerializer<UK, UV>) ser;
        this.userKeySerializer = m.getKeySerializer();
        this.userValueSerializer = m.getValueSerializer();
    }

    @Override
    public void update(TypeSerializer<N> ns, TypeSerializer<Map<UK, UV>> value, Map<UK, UV> d) {
        super.update(ns, value, d);
        setSerializers(value);
    }

    /** Key, namespace and marked user key at 0: returns the user key's length. */
    private int userKey(int klen, UK uk) throws Exception {
        SfsIo.Out out = io().out.at(klen);
        out.writeByte(MARK);
        userKeySerializer.serialize(uk, out);
        return out.position() - klen;
    }

    /** @uk's stored value at 0 of the io buffer: its length, or ABSENT. One crossing. */
    private int find(UK uk) throws Exception {
        int klen = key(namespace);
        long nl = nsLen();
        int ulen = userKey(klen, uk);
        int n = SfsNative.mapGet(h(), id, kg(), nl, klen, ulen);
        while (n <= SfsNative.NEED_BASE) {
            grow(n, klen + ulen);
            n = SfsNative.mapGet(h(), id, kg(), nl, klen, ulen);
        }
        return n;
    }

    @Override
    public UV get(UK uk) throws Exception {
        int n = find(uk);
        if (n == SfsNative.ABSENT) {
            return null;
        }
        SfsIo.In in = io().in.over(0, n);
        return in.readBoolean() ? null : userValueSerializer.deserialize(in);
    }

    @Override
    public void put(UK uk, UV uv) throws Exception {
        int klen = key(namespace);
        int ulen = userKey(klen, uk);
        SfsIo.Out out = io().out.at(klen + ulen);
        out.writeBoolean(uv == null);
        if (uv != null) {
            userValueSerializer.serialize(uv, out);
        }
        SfsNative.mapPut(h(), id, kg(), nsLen(), klen, ulen, out.position() - klen - ulen);
    }

    @Override
    public void putAll(Map<UK, UV> map) throws Exception {
        if (map == null) {
            return;
        }
        for (Map.Entry<UK, UV> e : map.entrySet()) {
            put(e.getKey(), e.getValue());
        }
    }

    @Override
    public void remove(UK uk) throws Exception {
        int klen = key(namespace);
        int ulen = userKey(klen, uk);
        SfsNative.mapRemove(h(), id, kg(), nsLen(), klen, ulen);
    }

    @Override
    public boolean contains(UK uk) throws Exception {
        return find(uk) != SfsNative.ABSENT;
    }

    /** Every entry of the current key and namespace, deserialized. */
    private List<Map.Entry<UK, UV>> load() throws Exception {
        int klen = key(namespace);
        long nl = nsLen();
        int total = SfsNative.mapIter(h(), id, kg(), nl, klen);
        while (total <= SfsNative.NEED_BASE) {
            // the entries that fit overwrote the key's bytes: grow, write them again
            grow(total, 0);
            klen = key(namespace);
            total = SfsNative.mapIter(h(), id, kg(), nl, klen);
        }
        SfsIo io = io();
        List<Map.Entry<UK, UV>> out = new ArrayList<>();
        int pos = 0;
        while (pos < total) {
            int ul = io.nativeInt(pos);
            SfsIo.In in = io.in.over(pos + 4 + 1, pos + 4 + ul); // past the marker
            UK uk = userKeySerializer.deserialize(in);
            pos += 4 + ul;
            int vl = io.nativeInt(pos);
            in = io.in.over(pos + 4, pos + 4 + vl);
            UV uv = in.readBoolean() ? null : userValueSerializer.deserialize(in);
            pos += 4 + vl;
            out.add(new Entry(uk, uv));
        }
        return out;
    }

    /** An entry whose setValue writes through. */
    private final class Entry extends AbstractMap.SimpleEntry<UK, UV> {
        private static final long serialVersionUID = 1L;

        Entry(UK k, UV v) {
            super(k, v);
        }

        @Override
        public UV setValue(UV v) {
            UV old = super.setValue(v);
            try {
                put(getKey(), v);
            } catch (Exception e) {
                throw new RuntimeException("sfs-flink: map entry update failed", e);
            }
            return old;
        }
    }

    @Override
    public Iterable<Map.Entry<UK, UV>> entries() throws Exception {
        List<Map.Entry<UK, UV>> all = load();
        return () -> iterator(all);
    }

    @Override
    public Iterable<UK> keys() throws Exception {
        List<Map.Entry<UK, UV>> all = load();
        return () -> mapped(iterator(all), Map.Entry::getKey);
    }

    @Override
    public Iterable<UV> values() throws Exception {
        List<Map.Entry<UK, UV>> all = load();
        return () -> mapped(iterator(all), Map.Entry::getValue);
    }

    /** @it's entries as @f maps them; remove() removes the entry from the state. */
    private static <E, T> Iterator<T> mapped(Iterator<E> it, java.util.function.Function<E, T> f) {
        return new Iterator<T>() {
            public boolean hasNext() {
                return it.hasNext();
            }

            public T next() {
                return f.apply(it.next());
            }

            public void remove() {
                it.remove();
            }
        };
    }

    @Override
    public Iterator<Map.Entry<UK, UV>> iterator() throws Exception {
        return iterator(load());
    }

    /** Iterates a loaded list; remove() removes the entry from the state. */
    private Iterator<Map.Entry<UK, UV>> iterator(List<Map.Entry<UK, UV>> all) {
        N ns = namespace;
        return new Iterator<Map.Entry<UK, UV>>() {
            private int i;
            private Map.Entry<UK, UV> last;

            public boolean hasNext() {
                return i < all.size();
            }

            public Map.Entry<UK, UV> next() {
                if (i >= all.size()) {
                    throw new java.util.NoSuchElementException();
                }
                return last = all.get(i++);
            }

            public void remove() {
                if (last == null) {
                    throw new IllegalStateException("remove() before next()");
                }
                try {
                    N saved = namespace;
                    namespace = ns;
                    SfsMapState.this.remove(last.getKey());
                    namespace = saved;
                } catch (Exception e) {
                    throw new RuntimeException("sfs-flink: map entry removal failed", e);
                }
                last = null;
            }
        };
    }

    @Override
    public boolean isEmpty() throws Exception {
        int klen = key(namespace);
        long nl = nsLen();
        int total = SfsNative.mapIter(h(), id, kg(), nl, klen);
        return total == 0;
    }

    @Override
    public void clear() {
        int klen = key(namespace);
        SfsNative.mapClear(h(), id, kg(), nsLen(), klen);
    }
}
