package io.sfs.nexmark.flink;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * One Nexmark query on one state backend in a fresh local cluster (this JVM), then one JSON line
 * on stdout: the processing time (the job's net runtime, not the JVM's start), this JVM's CPU
 * time, the result's digest ({@link ResultDigest}) and the checkpoints' figures
 * ({@link CheckpointStats}: Flink's own, from its REST API). bench/flink/nexmark.sh adds the CPU
 * of every process (the JVM's children — sfs's supervisor, compactor and checkpointer —
 * included), their memory and the bytes on disk and in shared memory.
 *
 * <pre>
 * NexmarkJob --query q4 --backend sfs|hashmap|rocksdb|forst --events N --ckpt-ms 10000
 *            --work DIR [--rows FILE] [--sfs-bin DIR]
 * NexmarkJob ... --remote HOST:PORT [--fail-file FILE]
 * </pre>
 *
 * <p>With --remote the job is submitted to a running cluster (flink/cluster/standalone.sh,
 * whose JVMs carry this module's classes) and this JVM prints {@code JOB <id>} and exits: the
 * cluster's configuration then gives the memory, the checkpoint directory and sfs's
 * directories; the job gives the backend, the checkpoint interval and the fail file
 * ({@link NexmarkTables}). bench/flink/recovery.sh runs it so.
 *
 * <p>Configuration, as the published runs (../shared/FLINK.md): parallelism 1 (one slot), 2800
 * MiB of managed memory for the slot — what RocksDB and ForSt size their block cache and write
 * buffers from, and what sfs takes its buffers and value cache from — mini-batch on (2 s, 50,000
 * rows), distinct aggregates split, incremental checkpoints every --ckpt-ms into DIR/checkpoints;
 * the backends' local files (RocksDB's and ForSt's instances, sfs's data directory) under
 * DIR/local and DIR/sfs.
 */
public final class NexmarkJob {
    private NexmarkJob() {}

    public static void main(String[] a) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 0; i + 1 < a.length; i += 2) {
            o.put(a[i].replaceFirst("^--", ""), a[i + 1]);
        }
        String query = o.getOrDefault("query", "q0");
        String backend = o.getOrDefault("backend", "sfs");
        long events = Long.parseLong(o.getOrDefault("events", "1000000"));
        long ckptMs = Long.parseLong(o.getOrDefault("ckpt-ms", "10000"));
        Path work = Paths.get(o.getOrDefault("work", "/tmp/sfs-nexmark-flink")).toAbsolutePath();
        Files.createDirectories(work);

        String sql;
        try (InputStream in = NexmarkJob.class.getResourceAsStream("/queries/" + query + ".sql")) {
            if (in == null) {
                System.err.println("nexmark: no query " + query + " (bench/flink/nexmark/src/main/resources/queries)");
                System.exit(2);
            }
            sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        String header = null;
        for (String line : sql.split("\n")) {
            if (line.startsWith("-- columns: ")) {
                header = line.substring("-- columns: ".length()).trim();
            }
        }

        String remote = o.get("remote");
        Configuration c = new Configuration();
        c.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(ckptMs));
        c.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
        int restPort = 0;
        if (remote == null) {
            c.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("2800m"));
            c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, work.resolve("checkpoints").toUri().toString());
            Files.createDirectories(work.resolve("local"));
            c.set(CoreOptions.TMP_DIRS, work.resolve("local").toString());
            restPort = CheckpointStats.freePort();
            c.set(RestOptions.PORT, restPort);
        }
        switch (backend) {
            case "sfs":
                c.set(StateBackendOptions.STATE_BACKEND, "io.sfs.flink.SfsStateBackendFactory");
                if (remote == null) {
                    c.setString("state.backend.sfs.bin-dir", o.getOrDefault("sfs-bin", "bin"));
                    c.setString("state.backend.sfs.data-dir", work.resolve("sfs").toString());
                }
                break;
            case "rocksdb":
            case "hashmap":
            case "forst":
                c.set(StateBackendOptions.STATE_BACKEND, backend);
                break;
            default:
                System.err.println("nexmark: unknown backend " + backend + " (sfs, rocksdb, hashmap, forst)");
                System.exit(2);
        }
        StreamExecutionEnvironment env;
        if (remote == null) {
            env = StreamExecutionEnvironment.createLocalEnvironment(1, c);
        } else {
            String[] hp = remote.split(":");
            env = StreamExecutionEnvironment.createRemoteEnvironment(hp[0], Integer.parseInt(hp[1]), c);
            env.setParallelism(1);
        }
        StreamTableEnvironment t = StreamTableEnvironment.create(env);
        Configuration tc = t.getConfig().getConfiguration();
        tc.setString("table.exec.mini-batch.enabled", o.getOrDefault("mini-batch", "true"));
        tc.setString("table.exec.mini-batch.allow-latency", "2 s");
        tc.setString("table.exec.mini-batch.size", "50000");
        tc.setString("table.optimizer.distinct-agg.split.enabled", "true");
        NexmarkTables.register(env, t, events, o.get("fail-file"));

        Table result = t.sqlQuery(sql);
        Path digestFile = work.resolve("digest.txt");
        Files.deleteIfExists(digestFile);
        t.toChangelogStream(result)
                .addSink(new ResultDigest(header, digestFile.toString(), o.get("rows")))
                .name("digest")
                .setParallelism(1);
        JobClient job = env.executeAsync("nexmark " + query + " on " + backend);
        if (remote != null) {
            System.out.println("JOB " + job.getJobID());
            System.exit(0);
        }
        CheckpointStats ckpts = CheckpointStats.poll(restPort, job.getJobID());
        JobExecutionResult r = job.getJobExecutionResult().get();
        ckpts.stop();
        double seconds = r.getNetRuntime() / 1000.0;
        long cpuNs = ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
        String digest = Files.readString(digestFile).trim();
        System.out.printf(java.util.Locale.ROOT,
                "NEXMARK {\"query\": \"%s\", \"backend\": \"%s\", \"events\": %d, \"seconds\": %.3f,"
                        + " \"events_per_sec\": %.0f, \"jvm_cpu_s\": %.3f, \"result_digest\": \"%s\","
                        + " \"ckpt_ms\": %d, %s}%n",
                query, backend, events, seconds, events / seconds, cpuNs / 1e9, digest, ckptMs,
                ckpts.json());
        System.exit(0); // the sfs group's shutdown hook stops it
    }

}
