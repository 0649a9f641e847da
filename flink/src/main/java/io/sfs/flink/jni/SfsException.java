package io.sfs.flink.jni;

/** A failed sfs call: the message names the call and carries sfs_last_error()'s words. */
public final class SfsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public SfsException(String message) {
        super(message);
    }
}
