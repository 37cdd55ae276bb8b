package io.strongroom.dataplane.sink;

import java.util.List;

/** What a pipeline does to a chunk of one task's fresh records: one verdict per record, in order. */
interface RecordTransform {
    List<Verdict> apply(List<SourceRecord> records);
}
