package io.sfs.flink.state;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.runtime.state.internal.InternalKvState;

import io.sfs.flink.jni.SfsIo;
import io.sfs.flink.jni.SfsNative;

/**
 * What every sfs state shares: its sfs state id, its serializers, and the current namespace.
 *
 * <p>An sfs key is the Flink key's serialized bytes followed by the namespace's; sfs's 64-bit
 * namespace argument carries the namespace's length, so a staged entry splits again into key and
 * namespace. The key group is Flink's own (the backend's current one), passed with every call.
 * All of it runs on the task thread.
 */
public abstract class AbstractSfsState<K, N, V> implements InternalKvState<K, N, V> {
    protected final SfsStateContext<K> ctx;
    protected final int id;
    protected TypeSerializer<N> namespaceSerializer;
    protected TypeSerializer<V> valueSerializer;
    protected V defaultValue;
    protected N namespace;

    protected AbstractSfsState(
            SfsStateContext<K> ctx,
            int id,
            TypeSerializer<N> namespaceSerializer,
            TypeSerializer<V> valueSerializer,
            V defaultValue) {
        this.ctx = ctx;
        this.id = id;
        this.namespaceSerializer = namespaceSerializer;
        this.valueSerializer = valueSerializer;
        this.defaultValue = defaultValue;
    }

    /** A state of the same name registered again: its new serializers and default. */
    public void update(TypeSerializer<N> ns, TypeSerializer<V> value, V defaultValue) {
        this.namespaceSerializer = ns;
        this.valueSerializer = value;
        this.defaultValue = defaultValue;
    }

    public int sfsId() {
        return id;
    }

    @Override
    public TypeSerializer<K> getKeySerializer() {
        return ctx.keySerializer();
    }

    @Override
    public TypeSerializer<N> getNamespaceSerializer() {
        return namespaceSerializer;
    }

    @Override
    public TypeSerializer<V> getValueSerializer() {
        return valueSerializer;
    }

    @Override
    public void setCurrentNamespace(N namespace) {
        this.namespace = namespace;
    }

    /** Writes key and namespace @ns to the io buffer at 0: the key's length. */
    protected final int key(N ns) {
        return ctx.writeKey(ns, namespaceSerializer);
    }

    protected final SfsIo io() {
        return ctx.io();
    }

    protected final long h() {
        return ctx.handle();
    }

    protected final int kg() {
        return ctx.keyGroup();
    }

    /** The namespace length of the last {@link #key} (sfs's namespace argument). */
    protected final long nsLen() {
        return ctx.lastNamespaceLength();
    }

    protected V copyDefault() {
        return defaultValue == null ? null : valueSerializer.copy(defaultValue);
    }

    @Override
    public byte[] getSerializedValue(
            byte[] serializedKeyAndNamespace,
            TypeSerializer<K> safeKeySerializer,
            TypeSerializer<N> safeNamespaceSerializer,
            TypeSerializer<V> safeValueSerializer) {
        throw new UnsupportedOperationException("sfs-flink serves no queryable state");
    }

    @Override
    public StateIncrementalVisitor<K, N, V> getStateIncrementalVisitor(
            int recommendedMaxNumberOfReturnedRecords) {
        // Flink's heap-only incremental TTL clean-up; sfs's maintenance owns physical clean-up
        throw new UnsupportedOperationException(
                "sfs-flink: incremental TTL clean-up is the heap backend's");
    }

    /** Grows the io buffer for an answer that did not fit (keeping the key). */
    protected final void grow(int answer, int keyLen) {
        io().ensure(SfsNative.needed(answer), keyLen);
    }
}
