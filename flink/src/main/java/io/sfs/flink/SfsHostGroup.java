package io.sfs.flink;

import io.sfs.flink.jni.SfsException;
import io.sfs.flink.jni.SfsNative;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The sfs group this TaskManager's keyed subtasks keep their state in: the compactor and
 * checkpointer processes over one shared segment per NUMA node.
 *
 * <p>Two ways to have one. By default the JVM starts its own on first use ({@code sfs run
 * --host}), supervised by that process, which watches the JVM ({@code --watch-pid}): when the JVM
 * exits — cleanly, crashed or killed with {@code kill -9} — it stops the group and removes its
 * segments, so a dead TaskManager leaves no sfs process or segment behind (a shutdown hook stops
 * it at once on a clean exit). Or, with {@code state.backend.sfs.group: NAME}, every TaskManager
 * of the host attaches to the one group an operator started beside them ({@code sfs run --host
 * --job NAME ...}: README "Use sfs from Flink"): one compactor for the host's TaskManagers.
 *
 * <p>Who owns what: the group's supervisor owns the segment and its children. A worker slot is
 * owned by the one context open on it — sfs_worker_open refuses a slot another context holds, in
 * any process — so TaskManagers sharing a group need no table of their own: each opens the first
 * slot nobody holds. This object knows the slots this JVM holds (open, or parked for local
 * recovery, which keeps the context open so no other process takes the slot).
 *
 * <p>Slots are reused. A task restarted on this TaskManager from the checkpoint its slot pinned
 * takes the slot back and rolls its store back in place ({@link Parked}: Flink's local
 * recovery). Any other subtask opens a slot nobody holds with {@code SFS_WORKER_RESET}: a slot a
 * subtask used before (of this or any TaskManager, alive or dead) is emptied in place first
 * (O(metadata), no file copied). With none left, the longest-parked slot of this JVM is given up.
 * So a host serves any number of failovers and jobs; at most as many keyed subtasks as the group
 * has slots are open at once. A slot whose reset fails is retired for this JVM's life.
 */
final class SfsHostGroup {
    private static final Map<String, SfsHostGroup> GROUPS = new HashMap<>();
    private static int started;

    final String job;
    final Path dataDir; // this JVM's files (restore downloads); the group's own are its data dir
    final int slots;
    private final Process process; // null: a group started beside this JVM, attached to
    /** Slots this JVM holds: open by a subtask's backend, or parked. */
    private final java.util.Set<Integer> held = new java.util.HashSet<>();
    /** Slots whose subtask ended with a pinned checkpoint, by the handle of that checkpoint
     * (in parking order: the first is given up first). */
    private final Map<String, Parked> parked = new java.util.LinkedHashMap<>();
    /** Slots whose reset failed: never opened again by this JVM. */
    private final java.util.Set<Integer> retired = new java.util.HashSet<>();
    /** Restores served in place (local recovery), for tests and logs. */
    static final java.util.concurrent.atomic.AtomicLong LOCAL_RESTORES = new java.util.concurrent.atomic.AtomicLong();
    /** Restores from files that adopted the files (sfs_worker_adopt), and that wrote entries back. */
    static final java.util.concurrent.atomic.AtomicLong ADOPTED_RESTORES = new java.util.concurrent.atomic.AtomicLong();
    static final java.util.concurrent.atomic.AtomicLong WRITTEN_RESTORES = new java.util.concurrent.atomic.AtomicLong();

    /**
     * A slot kept for Flink's local recovery: its subtask ended (failed, cancelled) after
     * checkpoint {@code checkpointId} completed and was pinned; the slot's store can go back to
     * it in place. A task of the same operator and key-group range restarted on this
     * TaskManager from exactly that checkpoint (the handle Flink gives it is the one this slot
     * wrote, {@code handleId}) takes the slot back: no download, no file copy.
     */
    static final class Parked {
        final int slot;
        final long ctx; // the slot's context, kept open: no other process takes the slot
        final String range; // max parallelism and key groups
        final long checkpointId;
        final String handleId;
        final List<org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot> metas;
        final List<SfsSnapshotFormat.StateIds> ids; // each state's TTL, sfs id and kind
        final long barrierBase; // the slot's barrier ids: SfsKeyedStateBackend#barrierOf
        final long lastBarrier; // the slot's sfs barriers go on above it

        Parked(int slot, long ctx, String range, long checkpointId, String handleId,
                List<org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot> metas, List<SfsSnapshotFormat.StateIds> ids,
                long barrierBase, long lastBarrier) {
            this.ctx = ctx;
            this.ids = ids;
            this.barrierBase = barrierBase;
            this.lastBarrier = lastBarrier;
            this.slot = slot;
            this.range = range;
            this.checkpointId = checkpointId;
            this.handleId = handleId;
            this.metas = metas;
        }
    }

    /**
     * Keeps @p. The checkpoint handle names the slot's subtask: Flink gives a handle back only
     * to the operator that wrote it, and the key range is checked at {@link #unpark}.
     */
    synchronized void park(Parked p) {
        parked.put(p.handleId, p);
    }

    /** The parked slot that wrote handle @handleId for key range @range, taken out (still held by
     * this JVM, its context open); or null. */
    synchronized Parked unpark(String handleId, String range) {
        Parked p = parked.get(handleId);
        if (p == null || !p.range.equals(range)) {
            return null;
        }
        parked.remove(handleId);
        return p;
    }

    private SfsHostGroup(String job, Path dataDir, int slots, Process p) {
        this.job = job;
        this.dataDir = dataDir;
        this.slots = slots;
        this.process = p;
    }

    /**
     * The group of this JVM for these settings: the named one of the host, attached to, or this
     * JVM's own, started if it is not running.
     */
    static synchronized SfsHostGroup get(SfsStateBackend.Settings s) throws IOException {
        if (s.group != null) {
            String key = "attach|" + s.group + "|" + s.dataDir;
            SfsHostGroup g = GROUPS.get(key);
            if (g == null) {
                g = attach(s);
                GROUPS.put(key, g);
            }
            return g;
        }
        String key = s.binDir + "|" + s.dataDir + "|" + s.slots + "|" + s.bufferMb + "|" + s.cacheMb
                + "|" + s.tableKeys;
        SfsHostGroup g = GROUPS.get(key);
        if (g != null && g.process.isAlive()) {
            return g;
        }
        g = start(s);
        GROUPS.put(key, g);
        return g;
    }

    /** The host's group @s.group, started beside this JVM: its slot count, and a directory here. */
    private static SfsHostGroup attach(SfsStateBackend.Settings s) throws IOException {
        int n;
        try {
            n = SfsNative.groupSlots(s.group);
        } catch (SfsException e) {
            throw new SfsException("sfs-flink: no sfs host group '" + s.group + "' on this host ("
                    + e.getMessage() + "); start it with: sfs run --host --job " + s.group
                    + " --workers N --data DIR (state.backend.sfs.group)");
        }
        Path data = Paths.get(s.dataDir).resolve("attached-" + ProcessHandle.current().pid());
        Files.createDirectories(data);
        return new SfsHostGroup(s.group, data, n, null);
    }

    private static SfsHostGroup start(SfsStateBackend.Settings s) throws IOException {
        long pid = ProcessHandle.current().pid();
        String job = "flink-" + pid + "-" + (++started);
        Path data = Paths.get(s.dataDir).resolve(job);
        Files.createDirectories(data);
        File sfs = findBinary(s.binDir);
        List<String> cmd = new ArrayList<>();
        cmd.add(sfs.getPath());
        cmd.add("run");
        cmd.add("--job");
        cmd.add(job);
        cmd.add("--host");
        cmd.add("--workers");
        cmd.add(Integer.toString(s.slots));
        cmd.add("--backend");
        cmd.add("table");
        cmd.add("--data");
        cmd.add(data.toString());
        cmd.add("--buffer-mb");
        cmd.add(Integer.toString(s.bufferMb));
        cmd.add("--cache-mb");
        cmd.add(Integer.toString(s.cacheMb));
        cmd.add("--table-keys");
        cmd.add(s.tableKeys);
        cmd.add("--watch-pid");
        cmd.add(Long.toString(pid));
        File log = data.resolve("sfs-host.log").toFile();
        Process p =
                new ProcessBuilder(cmd)
                        .redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.appendTo(log))
                        .start();
        SfsHostGroup g = new SfsHostGroup(job, data, s.slots, p);
        Runtime.getRuntime()
                .addShutdownHook(new Thread(g::stop, "sfs-host-group-stop-" + job));
        g.awaitStarted(log.toPath(), 20_000);
        return g;
    }

    private static File findBinary(String binDir) {
        String dir = binDir != null ? binDir : System.getenv("SFS_BIN");
        if (dir != null) {
            File f = new File(dir, "sfs");
            if (!f.canExecute()) {
                throw new SfsException(
                        "sfs-flink: " + f + " is missing or not executable (state.backend.sfs.bin-dir)");
            }
            return f;
        }
        String path = System.getenv("PATH");
        for (String d : path == null ? new String[0] : path.split(File.pathSeparator)) {
            File f = new File(d, "sfs");
            if (f.canExecute()) {
                return f;
            }
        }
        throw new SfsException(
                "sfs-flink: no sfs binary: set state.backend.sfs.bin-dir (or SFS_BIN), or put sfs on PATH");
    }

    /** The supervisor says "started" once its segment and children exist. */
    private void awaitStarted(Path log, long timeoutMs) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (System.nanoTime() < deadline) {
            String text = Files.exists(log) ? Files.readString(log, StandardCharsets.UTF_8) : "";
            if (text.contains("job " + job + " started") && text.contains("compactor0")) {
                return;
            }
            if (!process.isAlive()) {
                throw new SfsException(
                        "sfs-flink: the host group " + job + " did not start (exit " + process.exitValue()
                                + "); its log " + log + ":\n" + text);
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while the sfs group starts", e);
            }
        }
        stop();
        throw new SfsException("sfs-flink: the host group " + job + " did not start within " + timeoutMs + " ms; see " + log);
    }

    /**
     * A slot for one subtask's keyed backend, opened by @open (a slot index → its context, or 0
     * when another context holds the slot): the first slot neither this JVM nor another process
     * holds; else the longest-parked slot of this JVM, its local recovery given up. @open runs
     * under this object's lock (one JVM's claims are serialized; other processes race through
     * sfs_worker_open's own refusal). Returns {slot, context}.
     */
    synchronized long[] claimSlot(String who, java.util.function.IntToLongFunction open) {
        for (int i = 0; i < slots; i++) {
            if (held.contains(i) || retired.contains(i)) {
                continue;
            }
            long ctx = openOrRetire(i, open, who);
            if (ctx != 0) {
                held.add(i);
                return new long[] {i, ctx};
            }
        }
        java.util.Iterator<Parked> oldest = parked.values().iterator();
        while (oldest.hasNext()) {
            Parked p = oldest.next();
            oldest.remove();
            SfsNative.close(p.ctx);
            long ctx = openOrRetire(p.slot, open, who);
            if (ctx != 0) {
                return new long[] {p.slot, ctx};
            }
            held.remove(p.slot);
        }
        throw new SfsException(
                "sfs-flink: the sfs group " + job + " has all its " + slots + " worker slots in use"
                        + (process == null ? " (by this and the host's other TaskManagers)" : "")
                        + (retired.isEmpty() ? "" : " or retired after a failed reset (" + retired + ")")
                        + "; " + who + " cannot open its keyed state: raise "
                        + (process == null ? "the group's --workers" : "state.backend.sfs.slots (at most "
                                + SfsOptions.MAX_SLOTS + ")"));
    }

    private long openOrRetire(int slot, java.util.function.IntToLongFunction open, String who) {
        try {
            return open.applyAsLong(slot);
        } catch (RuntimeException e) {
            // its store may be half emptied: never opened again by this JVM
            retired.add(slot);
            throw e;
        }
    }

    /** Slot @slot's subtask ended without a pin: this JVM no longer holds it. */
    synchronized void release(int slot) {
        held.remove(slot);
    }

    boolean alive() {
        return process == null || process.isAlive();
    }

    void stop() {
        if (process == null || !process.isAlive()) {
            return;
        }
        process.destroy(); // SIGTERM: the supervisor stops its children and removes the segments
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
