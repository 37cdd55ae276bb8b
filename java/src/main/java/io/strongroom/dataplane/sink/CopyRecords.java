package io.strongroom.dataplane.sink;

import java.util.ArrayList;
import java.util.List;

/**
 * The exactly-once copy: every record written as it is (key, value, headers, timestamp) to its source
 * topic's output. No key and no sealing, so it measures the sink itself: the transactions, the offsets in
 * them and the writes ({@code bench/pipeline_bench.py}'s {@code eos-passthrough} side on the JVM engine).
 */
final class CopyRecords implements RecordTransform {
    private final SinkSettings settings;

    CopyRecords(SinkSettings settings) {
        this.settings = settings;
    }

    @Override
    public List<Verdict> apply(List<SourceRecord> records) {
        List<Verdict> verdicts = new ArrayList<>(records.size());
        String topic = null;
        String output = null;
        for (SourceRecord record : records) {
            if (!record.topic().equals(topic)) {
                topic = record.topic();
                output = settings.planFor(topic).output();
            }
            verdicts.add(Verdict.written(record, output, record.value(), record.headers(), Verdict.OK));
        }
        return verdicts;
    }
}
