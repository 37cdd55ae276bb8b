package io.strongroom.dataplane.sink;

import java.util.ArrayList;
import java.util.List;

/** A record sent unchanged to the dead-letter topic, with the reason and its source coordinates as headers. */
final class DeadLetter {
    static final String REASON = "strongroom.dead-letter.reason";
    static final String SOURCE = "strongroom.dead-letter.source";

    private DeadLetter() {
    }

    static Verdict of(SourceRecord record, String topic, String status, String reason) {
        List<SourceRecord.Header> headers = new ArrayList<>(record.headers());
        headers.add(new SourceRecord.Header(REASON, PartitionTxn.utf8(reason)));
        headers.add(new SourceRecord.Header(SOURCE, PartitionTxn.utf8(record.source())));
        return new Verdict(true, topic, record.key(), record.value(), headers, record.timestampMs(), status, reason,
                false);
    }
}
