package io.strongroom.dataplane.keys;

/**
 * The key service could not answer: unreachable, refused (token, TLS pin), or it answered with an error.
 * Mirrors the Python client's {@code PipelineError}: a problem and the operator's next step, never a key
 * or the token.
 */
public final class KeyServiceException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String problem;
    private final String hint;

    public KeyServiceException(String problem, String hint) {
        super(problem + " (" + hint + ")", null, false, false);
        this.problem = problem;
        this.hint = hint;
    }

    public String problem() {
        return problem;
    }

    public String hint() {
        return hint;
    }
}
