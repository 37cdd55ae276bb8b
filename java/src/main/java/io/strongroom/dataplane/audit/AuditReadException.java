package io.strongroom.dataplane.audit;

/**
 * A range could not be read: no progress for the idle timeout, the leader says there are records that never
 * arrive, or the client failed. The scrub must fail loudly, never count a short read as missing data. The
 * Python side recognises the message prefix {@link #PREFIX} and raises its {@code KafkaReadError}.
 */
public final class AuditReadException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    /** The start of every message, for the Python side to recognise in a Spark error. */
    public static final String PREFIX = "strongroom audit read failed: ";

    AuditReadException(String problem) {
        super(PREFIX + problem);
    }

    AuditReadException(String problem, Throwable cause) {
        super(PREFIX + problem, cause);
    }
}
