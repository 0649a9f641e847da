package io.sfs.flink;

import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;

import java.io.DataOutput;
import java.io.IOException;
import java.util.List;

/**
 * The stream of one subtask's checkpoint (sfs-flink format 1):
 *
 * <pre>
 *   int magic "SFSF", int version 1, Flink's KeyedBackendSerializationProxy (key serializer
 *   and each state's meta info: name, type, serializer snapshots; a state's index is its
 *   place in that list), then per state a long: the TTL sfs kept for it (0: none)
 *   then, at each key group's offset (KeyGroupRangeOffsets):
 *     entries: short state index, int klen, key and namespace bytes, int nsLen,
 *              int ulen (-1: none), user key bytes, int vlen, value bytes
 *     short -1: the key group's end
 * </pre>
 *
 * A value state's entry is its value; a list's entries are its elements (user key: sfs's
 * sequence, ignored at restore, where appends keep the order); a map's are its entries.
 */
final class SfsSnapshotFormat {
    static final int MAGIC = 0x53465346;
    static final int VERSION = 1;
    static final short END_OF_KEY_GROUP = -1;

    private SfsSnapshotFormat() {}

    static void writeHeader(DataOutputView out, KeyedBackendSerializationProxy<?> proxy, List<Long> ttls)
            throws IOException {
        out.writeInt(MAGIC);
        out.writeInt(VERSION);
        proxy.write(out);
        for (long t : ttls) {
            out.writeLong(t);
        }
    }

    /** Reads the header (the TTLs into @ttls); names @what (the handle) when it is not ours. */
    static void readHeader(DataInputView in, KeyedBackendSerializationProxy<?> proxy, List<Long> ttls, String what)
            throws IOException {
        int magic = in.readInt();
        if (magic != MAGIC) {
            throw new IOException(
                    "sfs-flink: " + what + " is not an sfs checkpoint (magic " + Integer.toHexString(magic) + ")");
        }
        int v = in.readInt();
        if (v != VERSION) {
            throw new IOException("sfs-flink: " + what + ": format version " + v + ", expected " + VERSION);
        }
        proxy.read(in);
        for (int i = 0; i < proxy.getStateMetaInfoSnapshots().size(); i++) {
            ttls.add(in.readLong());
        }
    }

    static void writeEntry(DataOutput out, int state, byte[] key, int nsLen, byte[] ukey, byte[] value)
            throws IOException {
        out.writeShort(state);
        out.writeInt(key.length);
        out.write(key);
        out.writeInt(nsLen);
        if (ukey == null) {
            out.writeInt(-1);
        } else {
            out.writeInt(ukey.length);
            out.write(ukey);
        }
        byte[] v = value == null ? new byte[0] : value;
        out.writeInt(v.length);
        out.write(v);
    }
}
