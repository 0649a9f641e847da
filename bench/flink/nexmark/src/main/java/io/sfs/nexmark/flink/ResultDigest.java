package io.sfs.nexmark.flink;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.streaming.api.functions.sink.legacy.RichSinkFunction;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A query's result as the oracle defines it (tests/nexmark/README.md): each row formatted as a
 * CSV line — integers as digits, timestamps as epoch milliseconds (UTC), strings quoted only when
 * they hold a comma, a quote or a line break — and the bag of lines at the end of input, a
 * retraction (DELETE, UPDATE_BEFORE) taking its row back out.
 *
 * <p>The digest is order-free and O(1) in memory: the row count and the sum, modulo 2^64, of a
 * mixed 64-bit FNV-1a of each line ({@link #lineHash}), retractions subtracted. {@link #ofFile}
 * computes the same over a CSV file (the C runtime's {@code --output}), so the two compare. With
 * a rows file the sink also keeps the bag and writes it sorted, in the oracle's format, to
 * compare line by line (memory: the result's size). Parallelism 1: one instance sees every row.
 */
final class ResultDigest extends RichSinkFunction<Row> {
    private static final long serialVersionUID = 1L;
    final String header;
    final String digestFile;
    final String rowsFile; // null: no rows kept
    transient long rows;
    transient long sum;
    transient Map<String, Long> bag;

    ResultDigest(String header, String digestFile, String rowsFile) {
        this.header = header;
        this.digestFile = digestFile;
        this.rowsFile = rowsFile;
    }

    @Override
    public void open(OpenContext ctx) {
        rows = 0;
        sum = 0;
        bag = rowsFile != null ? new HashMap<>() : null;
    }

    @Override
    public void invoke(Row r, Context ctx) {
        String line = format(r);
        boolean add = r.getKind() == RowKind.INSERT || r.getKind() == RowKind.UPDATE_AFTER;
        long h = lineHash(line);
        rows += add ? 1 : -1;
        sum += add ? h : -h;
        if (bag != null) {
            bag.merge(line, add ? 1L : -1L, Long::sum);
        }
    }

    @Override
    public void close() throws IOException {
        Files.writeString(Paths.get(digestFile), digest(rows, sum) + "\n", StandardCharsets.UTF_8);
        if (bag != null) {
            List<byte[]> lines = new ArrayList<>();
            for (Map.Entry<String, Long> e : bag.entrySet()) {
                for (long i = 0; i < e.getValue(); i++) {
                    lines.add((e.getKey() + "\n").getBytes(StandardCharsets.UTF_8));
                }
            }
            lines.sort(java.util.Arrays::compareUnsigned);
            try (var out = Files.newOutputStream(Paths.get(rowsFile))) {
                out.write((header + "\n").getBytes(StandardCharsets.UTF_8));
                for (byte[] l : lines) {
                    out.write(l);
                }
            }
        }
    }

    static String digest(long rows, long sum) {
        return rows + ":" + String.format("%016x", sum);
    }

    static String format(Row r) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < r.getArity(); i++) {
            if (i > 0) {
                sb.append(',');
            }
            Object v = r.getField(i);
            if (v == null) {
                continue;
            } else if (v instanceof LocalDateTime) {
                sb.append(((LocalDateTime) v).toInstant(ZoneOffset.UTC).toEpochMilli());
            } else if (v instanceof java.time.Instant) {
                sb.append(((java.time.Instant) v).toEpochMilli());
            } else if (v instanceof LocalDate) {
                sb.append(v);
            } else if (v instanceof String) {
                String s = (String) v;
                if (s.indexOf(',') < 0 && s.indexOf('"') < 0 && s.indexOf('\n') < 0 && s.indexOf('\r') < 0) {
                    sb.append(s);
                } else {
                    sb.append('"').append(s.replace("\"", "\"\"")).append('"');
                }
            } else {
                sb.append(v);
            }
        }
        return sb.toString();
    }

    /** FNV-1a 64 of the line's UTF-8 bytes, then murmur3's finalizer (sums need mixed bits). */
    static long lineHash(String line) {
        long h = 0xcbf29ce484222325L;
        for (byte b : line.getBytes(StandardCharsets.UTF_8)) {
            h ^= b & 0xff;
            h *= 0x100000001b3L;
        }
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        h *= 0xc4ceb9fe1a85ec53L;
        h ^= h >>> 33;
        return h;
    }

    /** The digest of a result CSV (a header line, then rows), as the sink computes it. */
    static String ofFile(Path csv) throws IOException {
        long rows = 0, sum = 0;
        boolean first = true;
        for (String line : Files.readAllLines(csv, StandardCharsets.UTF_8)) {
            if (first) {
                first = false;
                continue;
            }
            rows++;
            sum += lineHash(line);
        }
        return digest(rows, sum);
    }
}
