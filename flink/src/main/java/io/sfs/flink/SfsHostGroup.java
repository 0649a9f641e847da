package io.sfs.flink;

import io.sfs.flink.jni.SfsException;

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
 * This TaskManager's sfs group: the compactor and checkpointer processes over one shared
 * segment (a segment per NUMA node), started on first use by {@code sfs run --host} and
 * supervised by that process.
 *
 * <p>Who owns what: the JVM starts the group and owns the slot table (which worker slots its
 * subtasks hold); the group's supervisor owns the segment and its children. The supervisor
 * watches this JVM ({@code --watch-pid}): when the JVM exits — cleanly, crashed or killed with
 * {@code kill -9} — it stops the group and removes its segments, so a dead TaskManager leaves no
 * sfs process or segment behind. A shutdown hook stops it at once on a clean exit.
 *
 * <p>Slots are reused. A task restarted on this TaskManager from the checkpoint its slot pinned
 * takes the slot back and rolls its store back in place ({@link Parked}: Flink's local
 * recovery). Any other subtask takes a free slot — one whose subtask ended without a pin, or
 * else a never-used one, or else the longest-parked one (its local recovery is given up) — and
 * empties its store in place ({@code SFS_WORKER_RESET}: O(metadata), no file copied) before it
 * restores from files. So a TaskManager serves any number of failovers and jobs; at most
 * {@code state.backend.sfs.slots} keyed subtasks are open at once. A slot whose reset fails is
 * retired for the group's life.
 */
final class SfsHostGroup {
    private static final Map<String, SfsHostGroup> GROUPS = new HashMap<>();
    private static int started;

    final String job;
    final Path dataDir;
    final int slots;
    final int bufferMb;
    final int cacheMb;
    private final Process process;
    private int nextSlot;
    /** Slots whose subtask ended with a pinned checkpoint, by the handle of that checkpoint
     * (in parking order: the first is evicted first). */
    private final Map<String, Parked> parked = new java.util.LinkedHashMap<>();
    /** Slots whose subtask ended without a pin: emptied by their next subtask. */
    private final java.util.ArrayDeque<Integer> free = new java.util.ArrayDeque<>();
    /** Slots whose reset failed: never given out again. */
    private int retired;
    /** Restores served in place (local recovery), for tests and logs. */
    static final java.util.concurrent.atomic.AtomicLong LOCAL_RESTORES = new java.util.concurrent.atomic.AtomicLong();

    /**
     * A slot kept for Flink's local recovery: its subtask ended (failed, cancelled) after
     * checkpoint {@code checkpointId} completed and was pinned; the slot's store can go back to
     * it in place. A task of the same operator and key-group range restarted on this
     * TaskManager from exactly that checkpoint (the handle Flink gives it is the one this slot
     * wrote, {@code handleId}) takes the slot back: no download, no file copy.
     */
    static final class Parked {
        final int slot;
        final String range; // max parallelism and key groups
        final long checkpointId;
        final String handleId;
        final List<org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot> metas;
        final List<SfsSnapshotFormat.StateIds> ids; // each state's TTL, sfs id and kind
        final long barrierBase; // the slot's barrier ids: SfsKeyedStateBackend#barrierOf
        final long lastBarrier; // the slot's sfs barriers go on above it

        Parked(int slot, String range, long checkpointId, String handleId,
                List<org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot> metas, List<SfsSnapshotFormat.StateIds> ids,
                long barrierBase, long lastBarrier) {
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

    /** The parked slot that wrote handle @handleId for key range @range, taken out; or null. */
    synchronized Parked unpark(String handleId, String range) {
        Parked p = parked.get(handleId);
        if (p == null || !p.range.equals(range)) {
            return null;
        }
        parked.remove(handleId);
        return p;
    }

    private SfsHostGroup(String job, Path dataDir, int slots, int bufferMb, int cacheMb, Process p) {
        this.job = job;
        this.dataDir = dataDir;
        this.slots = slots;
        this.bufferMb = bufferMb;
        this.cacheMb = cacheMb;
        this.process = p;
    }

    /** The group of this JVM for these settings, started if it is not running. */
    static synchronized SfsHostGroup get(SfsStateBackend.Settings s) throws IOException {
        String key = s.binDir + "|" + s.dataDir + "|" + s.slots + "|" + s.bufferMb + "|" + s.cacheMb;
        SfsHostGroup g = GROUPS.get(key);
        if (g != null && g.process.isAlive()) {
            return g;
        }
        g = start(s);
        GROUPS.put(key, g);
        return g;
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
        cmd.add("--watch-pid");
        cmd.add(Long.toString(pid));
        File log = data.resolve("sfs-host.log").toFile();
        Process p =
                new ProcessBuilder(cmd)
                        .redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.appendTo(log))
                        .start();
        SfsHostGroup g = new SfsHostGroup(job, data, s.slots, s.bufferMb, s.cacheMb, p);
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

    /** A slot given to one subtask's keyed backend; {@code reused}: its store must be emptied. */
    static final class Claim {
        final int slot;
        final boolean reused;

        Claim(int slot, boolean reused) {
            this.slot = slot;
            this.reused = reused;
        }
    }

    /** A worker slot for one subtask's keyed backend (see the class comment for the order). */
    synchronized Claim claimSlot(String who) {
        if (!free.isEmpty()) {
            return new Claim(free.poll(), true);
        }
        if (nextSlot < slots) {
            return new Claim(nextSlot++, false);
        }
        java.util.Iterator<Parked> oldest = parked.values().iterator();
        if (oldest.hasNext()) {
            Parked p = oldest.next();
            oldest.remove();
            return new Claim(p.slot, true);
        }
        throw new SfsException(
                "sfs-flink: the host group " + job + " has all its " + slots + " worker slots in use"
                        + (retired > 0 ? " (" + retired + " retired after a failed reset)" : "")
                        + "; " + who + " cannot open its keyed state: raise state.backend.sfs.slots (at most "
                        + SfsOptions.MAX_SLOTS + ")");
    }

    /** Slot @slot's subtask ended without a pin: the slot is free. */
    synchronized void release(int slot) {
        free.add(slot);
    }

    /** Slot @slot could not be emptied: it is never given out again (counted for the message). */
    synchronized void retire(int slot) {
        retired++;
    }

    boolean alive() {
        return process.isAlive();
    }

    void stop() {
        if (!process.isAlive()) {
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
