package io.sfs.flink;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.runtime.state.StateBackendLoader;
import org.apache.flink.runtime.state.hashmap.HashMapStateBackend;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * The two backends the comparison tests run side by side: sfs, and Flink's HashMap backend as
 * the reference.
 *
 * <p>sfs is reached by name only (its factory through Flink's own {@link StateBackendLoader}, the
 * path {@code state.backend.type} takes on a cluster), so these tests compile without sfs's
 * classes. While {@code io.sfs.flink.SfsStateBackend} is absent, {@link #sfs} falls back to a
 * HashMap backend and the comparisons check the tests themselves (hashmap against hashmap);
 * {@code -Dsfs.require=true} turns the fallback into an error, and {@code -Dsfs.backend=hashmap}
 * forces it while the class is present (to run the suite against the reference alone).
 */
final class TestBackends {
    static final String BACKEND_CLASS = "io.sfs.flink.SfsStateBackend";
    static final String FACTORY_CLASS = "io.sfs.flink.SfsStateBackendFactory";
    static final String BIN_DIR = "state.backend.sfs.bin-dir";
    static final String DATA_DIR = "state.backend.sfs.data-dir";

    private TestBackends() {}

    /** Whether the tests run on sfs; false means the HashMap fallback. */
    static boolean sfsPresent() {
        if ("hashmap".equals(System.getProperty("sfs.backend"))) {
            requireNot("-Dsfs.backend=hashmap");
            return false;
        }
        try {
            Class.forName(BACKEND_CLASS, false, TestBackends.class.getClassLoader());
            Class.forName(FACTORY_CLASS, false, TestBackends.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException e) {
            requireNot(e.getMessage() + " is absent");
            return false;
        }
    }

    private static void requireNot(String why) {
        if (Boolean.getBoolean("sfs.require")) {
            throw new IllegalStateException(
                    "sfs.require=true but the tests would fall back to HashMapStateBackend: " + why);
        }
    }

    /** For assertion messages: which backend "sfs" is in this run. */
    static String sfsName() {
        return sfsPresent() ? "sfs" : "sfs(fallback: hashmap)";
    }

    /** The sfs binaries: -Dsfs.bin (surefire sets it), else ../bin of the module directory. */
    static String binDir() {
        String p = System.getProperty("sfs.bin");
        return (p != null && !p.isEmpty() ? Paths.get(p) : Paths.get("..", "bin"))
                .toAbsolutePath()
                .normalize()
                .toString();
    }

    /**
     * The configuration that selects sfs, its files under {@code tmp} (for a local cluster: a
     * job's configuration overrides the cluster's). Selects hashmap while sfs is absent.
     */
    static Configuration sfsConfig(Path tmp) {
        Configuration c = new Configuration();
        if (sfsPresent()) {
            c.set(StateBackendOptions.STATE_BACKEND, FACTORY_CLASS);
            c.setString(BIN_DIR, binDir());
            c.setString(DATA_DIR, tmp.toAbsolutePath().toString());
        } else {
            c.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        }
        return c;
    }

    /**
     * A fresh directory for one sfs host group's files, under target/sfs-test-data/<this JVM's
     * pid>/ (so {@code mvn clean} removes it), not under a JUnit {@code @TempDir}: a group runs
     * until the JVM exits, and JUnit deleting its directory under it fails the test ("Failed to
     * delete temp directory"). The directories of JVMs no longer alive are removed on first use.
     * One group per directory.
     */
    static synchronized Path dataDir(String name) {
        try {
            Path root = Paths.get("target", "sfs-test-data").toAbsolutePath();
            Path mine = root.resolve(Long.toString(ProcessHandle.current().pid()));
            if (!Files.isDirectory(mine)) {
                removeDeadJvmsDirs(root);
            }
            Files.createDirectories(mine);
            return Files.createTempDirectory(mine, name + "-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void removeDeadJvmsDirs(Path root) throws IOException {
        if (!Files.isDirectory(root)) {
            return;
        }
        try (Stream<Path> dirs = Files.list(root)) {
            for (Path d : (Iterable<Path>) dirs::iterator) {
                String n = d.getFileName().toString();
                if (n.matches("[0-9]+") && ProcessHandle.of(Long.parseLong(n)).isEmpty()) {
                    try (Stream<Path> all = Files.walk(d)) {
                        all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                    }
                }
            }
        }
    }

    static Configuration hashmapConfig() {
        Configuration c = new Configuration();
        c.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        return c;
    }

    /**
     * sfs, configured as a cluster would configure it, with its files under {@code tmp} (take it
     * from {@link #dataDir}).
     */
    static StateBackend sfs(Path tmp) {
        try {
            return StateBackendLoader.loadStateBackendFromConfig(
                    sfsConfig(tmp), TestBackends.class.getClassLoader(), null);
        } catch (Exception e) {
            throw new IllegalStateException("cannot load the sfs state backend", e);
        }
    }

    static StateBackend hashmap() {
        return new HashMapStateBackend();
    }
}
