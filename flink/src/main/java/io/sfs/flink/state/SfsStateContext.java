package io.sfs.flink.state;

import org.apache.flink.api.common.typeutils.TypeSerializer;

import io.sfs.flink.jni.SfsIo;

/** What a state needs of its backend: the native context, the io buffer, the current key. */
public interface SfsStateContext<K> {
    long handle();

    SfsIo io();

    TypeSerializer<K> keySerializer();

    /** The current key group (Flink's assignment). */
    int keyGroup();

    /** Writes the current key then namespace @ns at 0; returns their length. */
    <N> int writeKey(N ns, TypeSerializer<N> namespaceSerializer);

    long lastNamespaceLength();
}
