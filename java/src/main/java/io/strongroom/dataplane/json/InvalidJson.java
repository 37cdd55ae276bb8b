package io.strongroom.dataplane.json;

/** Text that strict JSON reading refuses; the caller decides which {@code ErrorKind} that is. */
public final class InvalidJson extends Exception {
    private static final long serialVersionUID = 1L;

    public InvalidJson(String reason) {
        super(reason, null, false, false);
    }
}
