package io.sfs.flink;

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;

/** The configuration of sfs-flink ({@code state.backend.sfs.*}); README "Use sfs from Flink". */
public final class SfsOptions {
    private SfsOptions() {}

    public static final ConfigOption<String> BIN_DIR =
            ConfigOptions.key("state.backend.sfs.bin-dir")
                    .stringType()
                    .noDefaultValue()
                    .withDescription(
                            "Directory of the sfs binaries (sfs, sfs-compactor, sfs-checkpointer) the"
                                    + " TaskManager starts its host group with; default: the"
                                    + " environment's SFS_BIN, else sfs on PATH.");

    public static final ConfigOption<String> DATA_DIR =
            ConfigOptions.key("state.backend.sfs.data-dir")
                    .stringType()
                    .noDefaultValue()
                    .withDescription(
                            "Local directory of the host group's files (its stores and staged"
                                    + " checkpoints); default: java.io.tmpdir/sfs-flink.");

    public static final ConfigOption<String> GROUP =
            ConfigOptions.key("state.backend.sfs.group")
                    .stringType()
                    .noDefaultValue()
                    .withDescription(
                            "The host's sfs group to attach to, started beside the TaskManagers with"
                                    + " `sfs run --host --job NAME --workers N --data DIR` (one per"
                                    + " host, shared by its TaskManagers). Unset: each TaskManager"
                                    + " starts and supervises its own group.");

    /** The most worker slots a host group has (sfs run's worker limit). */
    public static final int MAX_SLOTS = 48;

    public static final ConfigOption<Integer> SLOTS =
            ConfigOptions.key("state.backend.sfs.slots")
                    .intType()
                    .defaultValue(MAX_SLOTS)
                    .withDescription(
                            "Worker slots of the host group: keyed subtasks this TaskManager may"
                                    + " have open at once (at most " + MAX_SLOTS + "; a slot is reused"
                                    + " once its subtask ends).");

    public static final ConfigOption<Integer> BUFFER_MB =
            ConfigOptions.key("state.backend.sfs.buffer-mb")
                    .intType()
                    .defaultValue(4)
                    .withDescription("Each of a subtask's 4 write buffers, MiB.");

    public static final ConfigOption<Integer> CACHE_MB =
            ConfigOptions.key("state.backend.sfs.cache-mb")
                    .intType()
                    .defaultValue(4)
                    .withDescription("A subtask's value cache, MiB.");

    public static final ConfigOption<String> TABLE_KEYS =
            ConfigOptions.key("state.backend.sfs.table-keys")
                    .stringType()
                    .defaultValue("compressed")
                    .withDescription(
                            "How the group this TaskManager starts stores key pages in its data"
                                    + " files (sfs run --table-keys): compressed, or raw (a probe"
                                    + " reads keys in place). Flink's keys are serialized rows,"
                                    + " long and padded: compressed, Nexmark q4's state and"
                                    + " checkpoints are 3.8x smaller at the same throughput"
                                    + " (bench/RESULTS.md). A group started beside the"
                                    + " TaskManagers (state.backend.sfs.group) takes the flag of"
                                    + " its own command line.");

    public static final ConfigOption<Long> STAGE_TIMEOUT_MS =
            ConfigOptions.key("state.backend.sfs.stage-timeout-ms")
                    .longType()
                    .defaultValue(600_000L)
                    .withDescription(
                            "How long a checkpoint's asynchronous phase waits for the compactor to"
                                    + " stage a subtask's state.");
}
