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
 * restore from files reads).
 */
final class CheckpointStats {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** id -> {end-to-end ms, checkpointed bytes, state bytes}. Under itself. */
    private final TreeMap<Long, long[]> completed = new TreeMap<>();
    private volatile long failed;
    private volatile boolean stopped;
    private final Thread poller;

    private CheckpointStats(int port, JobID job) {
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
        HttpRequest req = HttpRequest.newBuilder(
                        URI.create("http://localhost:" + port + "/jobs/" + job + "/checkpoints"))
                .timeout(Duration.ofSeconds(5))
                .build();
        poller = new Thread(() -> {
            while (!stopped) {
                try {
                    HttpResponse<String> r = http.send(req, HttpResponse.BodyHandlers.ofString());
                    if (r.statusCode() == 200) {
                        add(JSON.readTree(r.body()));
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

    private void add(JsonNode root) {
        failed = root.path("counts").path("failed").asLong(0);
        synchronized (completed) {
            for (JsonNode c : root.path("history")) {
                if (!"COMPLETED".equals(c.path("status").asText())) {
                    continue;
                }
                completed.put(c.path("id").asLong(), new long[] {
                    c.path("end_to_end_duration").asLong(),
                    c.path("checkpointed_size").asLong(),
                    c.path("state_size").asLong()
                });
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

    /** The JSON fields (no braces): counts, medians and maxima, and every checkpoint as
     *  [id, ms, checkpointed bytes, state bytes] for the duration-against-size chart. */
    String json() {
        List<Long> ms = new ArrayList<>();
        List<Long> bytes = new ArrayList<>();
        StringBuilder each = new StringBuilder();
        long lastState = 0;
        synchronized (completed) {
            for (var e : completed.entrySet()) {
                long[] v = e.getValue();
                ms.add(v[0]);
                bytes.add(v[1]);
                lastState = v[2];
                each.append(each.length() == 0 ? "" : ", ")
                        .append(String.format(Locale.ROOT, "[%d, %d, %d, %d]", e.getKey(), v[0], v[1], v[2]));
            }
        }
        return String.format(Locale.ROOT,
                "\"ckpt_count\": %d, \"ckpt_failed\": %d, \"ckpt_ms_median\": %d, \"ckpt_ms_max\": %d,"
                        + " \"ckpt_bytes_median\": %d, \"ckpt_bytes_max\": %d, \"ckpt_state_bytes_last\": %d,"
                        + " \"ckpts\": [%s]",
                ms.size(), failed, median(ms), ms.isEmpty() ? 0 : Collections.max(ms), median(bytes),
                bytes.isEmpty() ? 0 : Collections.max(bytes), lastState, each);
    }
}
