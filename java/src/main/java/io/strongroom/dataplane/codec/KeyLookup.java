package io.strongroom.dataplane.codec;

/** Given a key reference, the 32-byte DEK, or null when the key was erased on purpose. Anything else throws. */
@FunctionalInterface
public interface KeyLookup {
    byte[] dekFor(KeyRef keyRef);
}
