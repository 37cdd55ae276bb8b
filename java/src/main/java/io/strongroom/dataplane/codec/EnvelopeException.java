package io.strongroom.dataplane.codec;

/**
 * A record that cannot be sealed or opened, with its {@link ErrorKind}. The message names the bad value
 * (never key material or plaintext; subjects only as a fingerprint) and ends with the kind's hint.
 */
public final class EnvelopeException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final ErrorKind kind;
    private final String problem;

    public EnvelopeException(ErrorKind kind, String problem) {
        super(problem + " (" + kind.hint() + ")", null, false, false);
        this.kind = kind;
        this.problem = problem;
    }

    public ErrorKind kind() {
        return kind;
    }

    /** The message without the hint. */
    public String problem() {
        return problem;
    }
}
