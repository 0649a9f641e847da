package io.sfs.nexmark.flink;

import org.apache.flink.api.common.JobID;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.TreeMap;

/**
 * A job's completed checkpoints, as Flink itself counts them: its REST API's
 * {@code /jobs/<id>/checkpoints}, polled once a second by a daemon thread of this JVM while the
 * job runs (the local cluster goes away with the job, so the figures are read while it is
 * there). Flink keeps only the last few checkpoints in that answer's history, so each poll adds
 * what it sees to a map by checkpoint id; at most the checkpoints of the job's last second are
 * missed.
 *
 * <p>Per checkpoint: its end-to-end duration (trigger to acknowledged by every task: for sfs
 * that includes the compactor's flush and the upload, as RocksDB's includes its flush and
 * upload), its checkpointed size (the bytes this checkpoint uploaded — for an incremental
 * checkpoint, what changed) and its state size (everything the checkpoint refers to: what a
 * restore from files reads). And where the time went, over the job's tasks (the slowest
 * subtask of each): the longest synchronous phase (at the barrier, on the task thread: for a
 * mini-batch operator that includes flushing its bundle into state), the longest asynchronous
 * phase (the backend's flush and upload), the longest alignment and start delay.
 */
final class CheckpointStats {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** id -> {end-to-end ms, checkpointed bytes, state bytes, sync ms, async ms, alignment ms,
     *  start delay ms}. Under itself. */
    private final TreeMap<Long, long[]> completed = new TreeMap<>();
    private volatile long failed;
    private volatile boolean stopped;
    private final Thread poller;

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    private final String base;

    private JsonNode get(String path) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(
                HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(5)).build(),
                HttpResponse.BodyHandlers.ofString());
        return r.statusCode() == 200 ? JSON.readTree(r.body()) : null;
    }

    private CheckpointStats(int port, JobID job) {
        base = "http://localhost:" + port + "/jobs/" + job;
        poller = new Thread(() -> {
            while (!stopped) {
                try {
                    JsonNode root = get("/checkpoints");
                    if (root != null) {
                        add(root);
                    }
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                } catch (IOException e) {
                    // the cluster is starting or has gone with the job: try again
                    try {
                        Thread.sleep(1000);
                    } catch (InterruptedException ie) {
                        return;
                    }
                }
            }
        }, "nexmark-checkpoint-stats");
        poller.setDaemon(true);
        poller.start();
    }

    static CheckpointStats poll(int restPort, JobID job) {
        return new CheckpointStats(restPort, job);
    }

    /** A port free now, for the local cluster's REST endpoint (a race with another process is
     *  possible and would fail the cluster's start loudly, not the figures silently). */
    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private void add(JsonNode root) throws IOException, InterruptedException {
        failed = root.path("counts").path("failed").asLong(0);
        for (JsonNode c : root.path("history")) {
            long id = c.path("id").asLong();
            synchronized (completed) {
                if (!"COMPLETED".equals(c.path("status").asText()) || completed.containsKey(id)) {
                    continue;
                }
            }
            long[] v = {
                c.path("end_to_end_duration").asLong(),
                c.path("checkpointed_size").asLong(),
                c.path("state_size").asLong(), 0, 0, 0, 0
            };
            JsonNode d = get("/checkpoints/details/" + id);
            for (var it = d == null ? null : d.path("tasks").fieldNames(); it != null && it.hasNext(); ) {
                JsonNode t = get("/checkpoints/details/" + id + "/subtasks/" + it.next());
                for (JsonNode st : t == null ? JSON.createArrayNode() : t.path("subtasks")) {
                    v[3] = Math.max(v[3], st.path("checkpoint").path("sync").asLong());
                    v[4] = Math.max(v[4], st.path("checkpoint").path("async").asLong());
                    v[5] = Math.max(v[5], st.path("alignment").path("duration").asLong());
                    v[6] = Math.max(v[6], st.path("start_delay").asLong());
                }
            }
            synchronized (completed) {
                completed.put(id, v);
            }
        }
    }

    /** One last poll is not possible (the cluster is gone): stops the poller. */
    void stop() throws InterruptedException {
        stopped = true;
        poller.interrupt();
        poller.join(5000);
    }

    private static long median(List<Long> v) {
        if (v.isEmpty()) {
            return 0;
        }
        List<Long> s = new ArrayList<>(v);
        Collections.sort(s);
        return s.size() % 2 == 1 ? s.get(s.size() / 2) : (s.get(s.size() / 2 - 1) + s.get(s.size() / 2)) / 2;
    }

    /** The JSON fields (no braces): counts, medians and maxima, and every checkpoint as [id, ms,
     *  checkpointed bytes, state bytes, sync ms, async ms, alignment ms, start delay ms]. */
    String json() {
        List<Long> ms = new ArrayList<>();
        List<Long> bytes = new ArrayList<>();
        List<Long> sync = new ArrayList<>();
        List<Long> async = new ArrayList<>();
        StringBuilder each = new StringBuilder();
        long lastState = 0;
        synchronized (completed) {
            for (var e : completed.entrySet()) {
                long[] v = e.getValue();
                ms.add(v[0]);
                bytes.add(v[1]);
                sync.add(v[3]);
                async.add(v[4]);
                lastState = v[2];
                each.append(each.length() == 0 ? "" : ", ")
                        .append(String.format(Locale.ROOT, "[%d, %d, %d, %d, %d, %d, %d, %d]",
                                e.getKey(), v[0], v[1], v[2], v[3], v[4], v[5], v[6]));
            }
        }
        return String.format(Locale.ROOT,
                "\"ckpt_count\": %d, \"ckpt_failed\": %d, \"ckpt_ms_median\": %d, \"ckpt_ms_max\": %d,"
                        + " \"ckpt_bytes_median\": %d, \"ckpt_bytes_max\": %d, \"ckpt_state_bytes_last\": %d,"
                        + " \"ckpt_sync_ms_median\": %d, \"ckpt_async_ms_median\": %d, \"ckpts\": [%s]",
                ms.size(), failed, median(ms), ms.isEmpty() ? 0 : Collections.max(ms), median(bytes),
                bytes.isEmpty() ? 0 : Collections.max(bytes), lastState, median(sync), median(async), each);
    }
}
