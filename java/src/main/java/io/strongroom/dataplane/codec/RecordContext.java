package io.strongroom.dataplane.codec;

/**
 * Where a record lives: its (logical) topic, its subject bytes and the AAD profile to seal with. The
 * subject is the per-subject id for SUBJECT_KEY envelopes and the record key (empty for a null key) for
 * WRAPPED_DEK envelopes. Opening uses the profile recorded in the envelope.
 */
public record RecordContext(String topic, byte[] subject, AadProfile profile) {
    public RecordContext {
        subject = subject.clone();
    }

    @Override
    public byte[] subject() {
        return subject.clone();
    }
}
