package io.sfs.flink;

import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;

import java.io.IOException;
import java.util.List;

/**
 * The meta file of one subtask's checkpoint (sfs-flink format 2), beside the staged files it
 * names (an IncrementalRemoteKeyedStateHandle's shared and private files):
 *
 * <pre>
 *   int magic "SFSF", int version 2,
 *   Flink's KeyedBackendSerializationProxy: the key serializer and each state's meta info
 *     (name, type, serializer snapshots),
 *   then per state, in that order: long ttlMs (0: sfs kept no TTL; its stored values then
 *     start with sfs's 8-byte expiry), int id (the sfs state id its entries carry in the
 *     files: the id in the group that wrote them), int kind (sfs's state kind)
 * </pre>
 *
 * A restore reads the files with sfs's own reader, naming their states by these ids, and
 * writes every entry of its key groups into its worker under the ids its own group gives.
 */
final class SfsSnapshotFormat {
    static final int MAGIC = 0x53465346;
    static final int VERSION = 2;

    private SfsSnapshotFormat() {}

    /** What the meta file says of one state besides Flink's meta info. */
    static final class StateIds {
        final long ttlMs;
        final int id;
        final int kind;

        StateIds(long ttlMs, int id, int kind) {
            this.ttlMs = ttlMs;
            this.id = id;
            this.kind = kind;
        }
    }

    static void write(DataOutputView out, KeyedBackendSerializationProxy<?> proxy, List<StateIds> states)
            throws IOException {
        out.writeInt(MAGIC);
        out.writeInt(VERSION);
        proxy.write(out);
        for (StateIds s : states) {
            out.writeLong(s.ttlMs);
            out.writeInt(s.id);
            out.writeInt(s.kind);
        }
    }

    /** Reads a meta file (the states into @states); names @what when it is not ours. */
    static void read(DataInputView in, KeyedBackendSerializationProxy<?> proxy, List<StateIds> states, String what)
            throws IOException {
        int magic = in.readInt();
        if (magic != MAGIC) {
            throw new IOException("sfs-flink: " + what + " is not an sfs checkpoint (magic "
                    + Integer.toHexString(magic) + ")");
        }
        int v = in.readInt();
        if (v != VERSION) {
            throw new IOException("sfs-flink: " + what + ": format version " + v + ", expected " + VERSION);
        }
        proxy.read(in);
        for (int i = 0; i < proxy.getStateMetaInfoSnapshots().size(); i++) {
            long ttl = in.readLong();
            int id = in.readInt();
            int kind = in.readInt();
            if (id < 0 || id >= 256 || kind < 1 || kind > 4 || ttl < 0) {
                throw new IOException("sfs-flink: " + what + ": state " + i + " has id " + id
                        + ", kind " + kind + ", ttl " + ttl + ": not an sfs state");
            }
            states.add(new StateIds(ttl, id, kind));
        }
    }
}
