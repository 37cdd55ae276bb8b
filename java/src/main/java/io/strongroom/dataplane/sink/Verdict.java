package io.strongroom.dataplane.sink;

import java.util.List;

/**
 * What the pipeline decided for one record, as the Python row transforms' output columns: whether to
 * write it (and what), the status counted in the summary, the reason of a rejection, and whether the
 * policy says stop.
 */
record Verdict(boolean emit, String topic, byte[] key, byte[] value, List<SourceRecord.Header> headers,
        Long timestampMs, String status, String reason, boolean fatal) {

    static final String OK = "ok";
    static final String PASSTHROUGH = "passthrough";
    static final String DROPPED = "dropped";
    static final String REJECTED = "rejected";

    static Verdict written(SourceRecord record, String topic, byte[] value, List<SourceRecord.Header> headers,
            String status) {
        return new Verdict(true, topic, record.key(), value, headers, record.timestampMs(), status, null, false);
    }

    static Verdict notWritten(SourceRecord record, String topic, String status, String reason, boolean fatal) {
        return new Verdict(false, topic, record.key(), null, null, record.timestampMs(), status, reason, fatal);
    }
}
