package io.strongroom.dataplane.sink;

import java.util.List;

/**
 * What a pipeline does to a chunk of one task's fresh records: one verdict per record, in order. A transform may
 * start on a chunk ({@link #prepare}: ask for its keys) and give its verdicts later ({@link Prepared#finish}), so
 * that the task reads the next chunk meanwhile; the task finishes chunks in the order it prepared them.
 */
interface RecordTransform extends AutoCloseable {
    List<Verdict> apply(List<SourceRecord> records);

    /** Start on {@code records}; by default nothing starts before {@link Prepared#finish}. */
    default Prepared prepare(List<SourceRecord> records) {
        return () -> apply(records);
    }

    /** Stop whatever the transform runs beside the task (no chunk is finished after this). */
    @Override
    default void close() {
    }

    /** A chunk the transform started on. */
    interface Prepared {
        /** The chunk's verdicts, in order (waits for what {@link #prepare} started). */
        List<Verdict> finish();

        /** The chunk will not be finished (the task failed): let go of what was fetched for it. */
        default void discard() {
        }
    }
}
