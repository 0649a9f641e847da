package io.sfs.flink.cluster;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * Checks {@link KillTmJob}'s output exactly: every line of every subtask attempt's file, one
 * line per key 0..96, each with the sum of x ≡ key (mod 97) over 0..n-1 and the count of those
 * x by x mod 3. A missing key, a key emitted twice (also by a failed attempt), a wrong sum or
 * count fails. Prints one line per problem (at most 20), then a summary; exit 0 only if exact.
 *
 * <p>Usage: {@code KillTmCheck outDir n [sumOffset]} — a non-zero sumOffset breaks the
 * expected sums, to show the check can fail.
 */
public final class KillTmCheck {
    public static void main(String[] args) throws IOException {
        if (args.length < 2 || args.length > 3) {
            System.err.println("usage: KillTmCheck outDir n [sumOffset]");
            System.exit(2);
        }
        Path dir = Paths.get(args[0]);
        long n = Long.parseLong(args[1]);
        long offset = args.length == 3 ? Long.parseLong(args[2]) : 0;
        int keys = (int) Math.min(KillTmJob.KEYS, n);
        int buckets = KillTmJob.BUCKETS;

        // expected: the sum in closed form (m terms k, k+97, ...), the counts by counting
        long[] sum = new long[keys];
        long[][] count = new long[keys][buckets];
        for (int k = 0; k < keys; k++) {
            long m = (n - 1 - k) / KillTmJob.KEYS + 1;
            sum[k] = m * k + (long) KillTmJob.KEYS * (m * (m - 1) / 2) + offset;
        }
        for (long x = 0; x < n; x++) {
            count[(int) (x % KillTmJob.KEYS)][(int) (x % buckets)]++;
        }

        List<String> problems = new ArrayList<>();
        TreeMap<Long, Integer> seen = new TreeMap<>();
        int files = 0;
        long lines = 0;
        List<Path> parts;
        try (Stream<Path> s = Files.list(dir)) {
            parts = s.filter(p -> p.getFileName().toString().startsWith("part-")).sorted().toList();
        }
        StringBuilder perFile = new StringBuilder();
        for (Path p : parts) {
            files++;
            List<String> ls = Files.readAllLines(p, StandardCharsets.UTF_8);
            perFile.append(' ').append(p.getFileName()).append('=').append(ls.size());
            for (String line : ls) {
                lines++;
                String[] f = line.trim().split(" ");
                if (f.length != 2 + buckets) {
                    problems.add(p.getFileName() + ": malformed line '" + line + "'");
                    continue;
                }
                long k = Long.parseLong(f[0]);
                if (k < 0 || k >= keys) {
                    problems.add(p.getFileName() + ": key " + k + " out of range");
                    continue;
                }
                seen.merge(k, 1, Integer::sum);
                long s = Long.parseLong(f[1]);
                if (s != sum[(int) k]) {
                    problems.add("key " + k + ": sum " + s + ", want " + sum[(int) k]
                            + " (off by " + (s - sum[(int) k]) + ")");
                }
                for (int b = 0; b < buckets; b++) {
                    long c = Long.parseLong(f[2 + b]);
                    if (c != count[(int) k][b]) {
                        problems.add("key " + k + ": count of x%3==" + b + " is " + c
                                + ", want " + count[(int) k][b]);
                    }
                }
            }
        }
        for (int k = 0; k < keys; k++) {
            Integer c = seen.get((long) k);
            if (c == null) {
                problems.add("key " + k + ": missing");
            } else if (c > 1) {
                problems.add("key " + k + ": emitted " + c + " times");
            }
        }
        for (int i = 0; i < Math.min(20, problems.size()); i++) {
            System.out.println("# " + problems.get(i));
        }
        System.out.println("# checked " + lines + " lines in " + files + " files (" + perFile.toString().trim()
                + ") against " + keys + " keys of n=" + n + ": " + problems.size() + " problems");
        System.exit(problems.isEmpty() ? 0 : 1);
    }
}
