package io.sfs.flink.jni;

import java.nio.ByteBuffer;

/**
 * The native half of sfs-flink (flink/jni/sfs_jni.c), over sfs's public API only.
 *
 * <p>One context is one sfs worker: one subtask's keyed backend. Its state calls come from the
 * task thread only; {@link #staged}, {@link #scan} and {@link #dropStage} may come from the
 * snapshot's asynchronous thread at the same time (they read only shared words).
 *
 * <p>Bytes travel in the context's direct "io" buffer ({@link #setIo}): a call's arguments are
 * lengths and the bytes sit at fixed places — the sfs key (the Flink key's bytes, then the
 * namespace's) at 0, a map's user key right after it, the value after that. A read answers in
 * the same buffer from 0: a length, {@link #ABSENT}, or a value at or below {@link #NEED_BASE}
 * when the buffer is too small ({@link #needed} bytes: grow it, call again). Lists and map
 * iterations answer as {@code [u32 len][bytes]...} in native byte order.
 *
 * <p>Cost of one state operation: one JNI crossing with primitive arguments (no object passed,
 * no JNIEnv call inside), no allocation, one copy of the bytes into sfs (or out of it).
 */
public final class SfsNative {
    public static final int KIND_VALUE = 1;
    public static final int KIND_MAP = 3;
    public static final int KIND_LIST = 4;

    /** The subdirectory of a stage whose files never change once written (sfs.h). */
    public static final String SHARED = "shared";

    public static final int ABSENT = -1;
    public static final int NEED_BASE = -2;

    private SfsNative() {}

    /** Bytes a read that answered {@code r <= NEED_BASE} needs in the io buffer. */
    public static int needed(int r) {
        return NEED_BASE - r;
    }

    /** The JNI contract this Java side speaks: flink/jni/sfs_jni.c's SFS_JNI_ABI. */
    static final int ABI = 5;

    private static volatile boolean loaded;

    /**
     * Loads libsfs_jni: from {@code java.library.path}, or from the file the system property
     * {@code sfs.jni.path} names. Fails with one line that says what is missing.
     */
    public static synchronized void load() {
        if (loaded) {
            return;
        }
        String path = System.getProperty("sfs.jni.path");
        try {
            if (path != null) {
                System.load(path);
            } else {
                System.loadLibrary("sfs_jni");
            }
        } catch (UnsatisfiedLinkError e) {
            throw new SfsException(
                    "sfs-flink: cannot load libsfs_jni ("
                            + (path != null ? path : "java.library.path=" + System.getProperty("java.library.path"))
                            + "): "
                            + e.getMessage()
                            + " — build it with `make jni` (build/jni/libsfs_jni.so) and set -Djava.library.path or -Dsfs.jni.path");
        }
        int abi;
        try {
            abi = abi();
        } catch (UnsatisfiedLinkError e) {
            abi = 0; // a library older than the check
        }
        if (abi != ABI) {
            throw new SfsException(
                    "sfs-flink: libsfs_jni ("
                            + (path != null ? path : "java.library.path=" + System.getProperty("java.library.path"))
                            + ") speaks JNI contract " + abi + ", these classes " + ABI
                            + ": the library and the jar come from different builds (make flink builds both)");
        }
        loaded = true;
    }

    /** Receives the entries of a staged checkpoint ({@link #scan}); arrays are fresh per entry. */
    public interface ScanSink {
        void entry(int state, int keyGroup, long ns, byte[] key, byte[] userKey, byte[] value);
    }

    public static native String version();

    static native int abi();

    /**
     * Opens worker slot @slot of host group @job for one subtask; 0 when another context (of any
     * process) holds the slot. @reset: if a subtask used the slot before, its store is emptied in
     * place first (SFS_WORKER_RESET), and the slot takes this key-group range.
     */
    public static native long open(
            String job, int slot, int maxParallelism, int kgFirst, int kgLast, long bufferBytes, long cacheBytes,
            boolean reset);

    public static native void setIo(long ctx, ByteBuffer io);

    public static native void close(long ctx);

    /** A state's sfs id; {@code ttlMs > 0}: sfs stamps and drops expired entries (sfs_jni.c). */
    public static native int register(long ctx, String name, int kind, long ttlMs);

    public static native int valueGet(long ctx, int state, int kg, long ns, int klen);

    public static native void valuePut(long ctx, int state, int kg, long ns, int klen, int vlen);

    public static native void valueDelete(long ctx, int state, int kg, long ns, int klen);

    public static native int listGet(long ctx, int state, int kg, long ns, int klen);

    /** Appends {@code [u32 len][bytes]...} of {@code total} bytes placed after the key. */
    public static native void listAppend(long ctx, int state, int kg, long ns, int klen, int total);

    public static native void listClear(long ctx, int state, int kg, long ns, int klen);

    public static native int mapGet(long ctx, int state, int kg, long ns, int klen, int ulen);

    public static native void mapPut(long ctx, int state, int kg, long ns, int klen, int ulen, int vlen);

    public static native void mapRemove(long ctx, int state, int kg, long ns, int klen, int ulen);

    public static native int mapIter(long ctx, int state, int kg, long ns, int klen);

    public static native void mapClear(long ctx, int state, int kg, long ns, int klen);

    /** The task thread at Flink's barrier: sfs's seal (O(1), no I/O). */
    public static native void barrier(long ctx, long checkpointId);

    /** The async thread: waits for the compactor's stage of the barrier; its directory. */
    public static native String staged(long ctx, long checkpointId, long timeoutMs);

    /**
     * Every live entry of a staged directory (or a download with its layout): @states null for
     * this group's own registry, else {id, kind, ttlMs} triples as the files' group wrote them.
     */
    public static native void scan(long ctx, String stageDir, long[] states, ScanSink sink);

    public static native void dropStage(long ctx, String stageDir);

    /** The task thread, once Flink completed the checkpoint: keep its version (no wait). */
    public static native void pin(long ctx, long checkpointId);

    /**
     * A reopened worker back to its pinned checkpoint in place: null, or why it could not be
     * (then restore from files into a fresh worker; this one's state is undefined).
     */
    public static native String restorePinned(long ctx, long checkpointId, long timeoutMs);

    /**
     * A restore from files of exactly the key groups and state ids the files were staged with:
     * the checkpoint's files in {@code dir} (laid out as staged) become the worker's store,
     * linked, no entry read (sfs_worker_adopt). Null, or why not (the store is empty then: write
     * the entries back); throws when the compactor did not answer in time.
     */
    public static native String adopt(long ctx, String dir, long timeoutMs);

    /** The worker slots of host group @job (sfs_group_slots). */
    public static native int groupSlots(String job);

    /** The last sfs barrier the worker's slot sealed in any of its openings (0: none). */
    public static native long lastBarrier(long ctx);
}
