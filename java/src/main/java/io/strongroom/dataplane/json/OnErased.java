package io.strongroom.dataplane.json;

/** What decrypting does with a field whose key was erased: write {@code null}, or fail the record. */
public enum OnErased {
    NULL,
    RAISE
}
