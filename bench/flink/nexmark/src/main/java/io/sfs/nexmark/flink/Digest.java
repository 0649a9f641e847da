package io.sfs.nexmark.flink;

import java.nio.file.Paths;

/** {@code Digest FILE.csv}: the result digest of a CSV in the oracle's format (ResultDigest). */
public final class Digest {
    private Digest() {}

    public static void main(String[] a) throws Exception {
        System.out.println(ResultDigest.ofFile(Paths.get(a[0])));
    }
}
