package io.strongroom.dataplane.sink;

import java.util.List;

/**
 * A transform that needs the driver's keys for a chunk: {@link #start} asks for them, ahead of the chunk's
 * verdicts when the task prepares it (on the {@link KeyAsker}'s thread), at once when it applies it.
 */
abstract class KeyedTransform implements RecordTransform {
    /** Sends the prepared chunks' key requests while the task goes on. */
    protected final KeyAsker asker = new KeyAsker();

    /** Ask for the keys of {@code records} (on the asking thread when {@code ahead}); the verdicts come later. */
    protected abstract Prepared start(List<SourceRecord> records, boolean ahead);

    @Override
    public final List<Verdict> apply(List<SourceRecord> records) {
        return start(records, false).finish();
    }

    /** Ask for the chunk's keys on the asking thread; the task reads the next chunk meanwhile. */
    @Override
    public final Prepared prepare(List<SourceRecord> records) {
        return start(records, true);
    }

    @Override
    public final void close() {
        asker.close();
    }
}
