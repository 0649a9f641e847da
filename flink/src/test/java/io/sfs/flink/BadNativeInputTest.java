package io.sfs.flink;

import io.sfs.flink.jni.SfsException;
import io.sfs.flink.jni.SfsNative;

import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What a TaskManager meets that is not right stops the subtask at start, with one line that
 * names it: a missing JNI library, an sfs segment of another format version, one that is not
 * an sfs segment at all.
 */
class BadNativeInputTest {

    /** The root cause's message of a failure. */
    static String rootMessage(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t.getMessage();
    }

    @Test
    void missingJniLibraryStopsTheSubtaskNamingIt(@TempDir Path tmp) throws Exception {
        String missing = tmp.resolve("no-such-dir/libsfs_jni.so").toString();
        System.setProperty("sfs.jni.path", missing);
        try (KeyedOneInputStreamOperatorTestHarness<String, String, String> h = SfsBackendSmokeTest.harness(tmp)) {
            assertThatThrownBy(h::open)
                    .satisfies(t -> assertThat(rootMessage(t))
                            .contains("cannot load libsfs_jni")
                            .contains(missing)
                            .contains("make jni")
                            .doesNotContain("\n"));
        } catch (Exception closing) {
            // closing a harness whose open failed may fail too: the open's failure is the test
        } finally {
            System.clearProperty("sfs.jni.path");
        }
    }

    /** A segment file in /dev/shm as another build or another program would leave it. */
    private static Path fakeSegment(String job, long magic, int version) throws Exception {
        Path seg = Paths.get("/dev/shm", "sfs." + job + ".0");
        ByteBuffer b = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(0, magic);
        b.putInt(8, version);
        Files.write(seg, b.array());
        Files.setPosixFilePermissions(seg, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        return seg;
    }

    @Test
    void segmentOfAnotherVersionIsRefusedNamingIt() throws Exception {
        SfsNative.load();
        String job = "flink-badver-" + ProcessHandle.current().pid();
        Path seg = fakeSegment(job, 0x314745535346534eL, 999);
        try {
            assertThatThrownBy(() -> SfsNative.open(job, 0, 128, 0, 127, 1 << 20, 1 << 20, false))
                    .isInstanceOf(SfsException.class)
                    .hasMessageContaining(seg.toString())
                    .hasMessageContaining("format version is 999");
        } finally {
            Files.deleteIfExists(seg);
        }
    }

    @Test
    void fileThatIsNoSegmentIsRefusedNamingIt() throws Exception {
        SfsNative.load();
        String job = "flink-badmagic-" + ProcessHandle.current().pid();
        Path seg = fakeSegment(job, 0x1234L, 3);
        try {
            assertThatThrownBy(() -> SfsNative.open(job, 0, 128, 0, 127, 1 << 20, 1 << 20, false))
                    .isInstanceOf(SfsException.class)
                    .hasMessageContaining(seg.toString())
                    .hasMessageContaining("magic");
        } finally {
            Files.deleteIfExists(seg);
        }
    }
}
