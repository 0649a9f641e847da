package io.sfs.flink;

import org.apache.flink.configuration.IllegalConfigurationException;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.AbstractManagedMemoryStateBackend;
import org.apache.flink.runtime.state.BackendBuildingException;
import org.apache.flink.runtime.state.ConfigurableStateBackend;
import org.apache.flink.runtime.state.DefaultOperatorStateBackendBuilder;
import org.apache.flink.runtime.state.OperatorStateBackend;

import io.sfs.flink.jni.SfsNative;

import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Paths;

/**
 * A Flink state backend whose keyed state lives in sfs: each keyed subtask is a worker of its
 * TaskManager's sfs host group ({@link SfsHostGroup}), its state calls go through JNI to the
 * group's shared memory ({@link io.sfs.flink.jni.SfsNative}), and the group's compactor flushes
 * and stages it. Timers live on the heap (Flink's {@code HeapPriorityQueueSetFactory}, their
 * snapshots Flink's own raw keyed state); operator state is Flink's default implementation.
 *
 * <p>Checkpoints: the synchronous phase is sfs's seal of the subtask's write buffer (O(1), no
 * I/O); the asynchronous phase waits for the compactor to stage that barrier's state, reads the
 * staged files and writes them to Flink's checkpoint storage by key group, so Flink's own
 * redistribution serves restores and rescales. See {@link SfsKeyedStateBackend}.
 *
 * <p>Selected by {@code state.backend.type: io.sfs.flink.SfsStateBackendFactory}.
 */
public class SfsStateBackend extends AbstractManagedMemoryStateBackend
        implements ConfigurableStateBackend {
    private static final long serialVersionUID = 1L;

    /** What a TaskManager needs to reach its group (resolved at configure time). */
    static final class Settings implements Serializable {
        private static final long serialVersionUID = 1L;
        String binDir;
        String group; // null: this JVM starts its own
        String dataDir = Paths.get(System.getProperty("java.io.tmpdir"), "sfs-flink").toString();
        int slots = SfsOptions.SLOTS.defaultValue();
        int bufferMb = SfsOptions.BUFFER_MB.defaultValue();
        int cacheMb = SfsOptions.CACHE_MB.defaultValue();
        long stageTimeoutMs = SfsOptions.STAGE_TIMEOUT_MS.defaultValue();
        String tableKeys = SfsOptions.TABLE_KEYS.defaultValue();

        Settings copy() {
            Settings s = new Settings();
            s.binDir = binDir;
            s.group = group;
            s.dataDir = dataDir;
            s.slots = slots;
            s.bufferMb = bufferMb;
            s.cacheMb = cacheMb;
            s.stageTimeoutMs = stageTimeoutMs;
            s.tableKeys = tableKeys;
            return s;
        }
    }

    private final Settings settings;

    public SfsStateBackend() {
        this.settings = new Settings();
    }

    private SfsStateBackend(Settings s) {
        this.settings = s;
    }

    public SfsStateBackend setBinDir(String dir) {
        settings.binDir = dir;
        return this;
    }

    public SfsStateBackend setDataDir(String dir) {
        settings.dataDir = dir;
        return this;
    }

    /** Attach to the host's group @name (state.backend.sfs.group) instead of starting one. */
    public SfsStateBackend setGroup(String name) {
        settings.group = name;
        return this;
    }

    /** Keyed subtasks the TaskManager's host group may have open at once (state.backend.sfs.slots). */
    public SfsStateBackend setSlots(int slots) {
        if (slots < 1 || slots > SfsOptions.MAX_SLOTS) {
            throw new IllegalArgumentException("slots: " + slots + ", want 1.." + SfsOptions.MAX_SLOTS);
        }
        settings.slots = slots;
        return this;
    }

    /** Each write buffer and the value cache of a subtask without managed memory, MiB. */
    public SfsStateBackend setMemoryMb(int bufferMb, int cacheMb) {
        settings.bufferMb = bufferMb;
        settings.cacheMb = cacheMb;
        return this;
    }

    @Override
    public SfsStateBackend configure(ReadableConfig config, ClassLoader classLoader)
            throws IllegalConfigurationException {
        Settings s = settings.copy();
        config.getOptional(SfsOptions.BIN_DIR).ifPresent(v -> s.binDir = v);
        config.getOptional(SfsOptions.GROUP).ifPresent(v -> s.group = v);
        config.getOptional(SfsOptions.DATA_DIR).ifPresent(v -> s.dataDir = v);
        config.getOptional(SfsOptions.SLOTS).ifPresent(v -> s.slots = v);
        config.getOptional(SfsOptions.TABLE_KEYS).ifPresent(v -> {
            if (!v.equals("raw") && !v.equals("compressed")) {
                throw new IllegalConfigurationException(
                        SfsOptions.TABLE_KEYS.key() + ": " + v + " (raw or compressed)");
            }
            s.tableKeys = v;
        });
        config.getOptional(SfsOptions.BUFFER_MB).ifPresent(v -> s.bufferMb = v);
        config.getOptional(SfsOptions.CACHE_MB).ifPresent(v -> s.cacheMb = v);
        config.getOptional(SfsOptions.STAGE_TIMEOUT_MS).ifPresent(v -> s.stageTimeoutMs = v);
        if (s.slots < 1 || s.slots > SfsOptions.MAX_SLOTS) {
            throw new IllegalConfigurationException(
                    SfsOptions.SLOTS.key() + ": " + s.slots + ", want 1.." + SfsOptions.MAX_SLOTS);
        }
        SfsStateBackend b = new SfsStateBackend(s);
        b.latencyTrackingConfigBuilder = latencyTrackingConfigBuilder.configure(config);
        b.sizeTrackingConfigBuilder = sizeTrackingConfigBuilder.configure(config);
        return b;
    }

    @Override
    public String getName() {
        return "sfs";
    }

    @Override
    public boolean supportsNoClaimRestoreMode() {
        // every checkpoint is self-contained (no file shared between checkpoints yet)
        return true;
    }

    @Override
    public boolean supportsSavepointFormat(SavepointFormatType formatType) {
        // Flink's canonical format is not written yet; a native savepoint is a checkpoint
        return formatType == SavepointFormatType.NATIVE;
    }

    @Override
    public <K> AbstractKeyedStateBackend<K> createKeyedStateBackend(
            KeyedStateBackendParameters<K> parameters) throws IOException {
        SfsNative.load();
        SfsHostGroup group = SfsHostGroup.get(settings);
        return new SfsKeyedStateBackendBuilder<>(
                        parameters,
                        group,
                        settings,
                        getCompressionDecorator(parameters.getEnv().getExecutionConfig()),
                        latencyTrackingConfigBuilder
                                .setMetricGroup(parameters.getMetricGroup())
                                .build(),
                        sizeTrackingConfigBuilder
                                .setMetricGroup(parameters.getMetricGroup())
                                .build())
                .build();
    }

    @Override
    public OperatorStateBackend createOperatorStateBackend(
            OperatorStateBackendParameters parameters) throws BackendBuildingException {
        return new DefaultOperatorStateBackendBuilder(
                        parameters.getEnv().getUserCodeClassLoader().asClassLoader(),
                        parameters.getEnv().getExecutionConfig(),
                        true,
                        parameters.getStateHandles(),
                        parameters.getCancelStreamRegistry())
                .build();
    }
}
