package io.strongroom.dataplane.schema;

/**
 * A schema-aware rule this engine cannot run (not a problem of one record): the task stops with the problem and
 * the operator's next step.
 */
public final class SchemaEngineException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String problem;
    private final String hint;

    public SchemaEngineException(String problem, String hint) {
        super(problem + (hint.isEmpty() ? "" : " (" + hint + ")"));
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
