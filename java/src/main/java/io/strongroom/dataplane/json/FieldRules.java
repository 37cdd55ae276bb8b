package io.strongroom.dataplane.json;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** A checked set of field paths to encrypt: parsed, no two overlapping. Compile once per topic. */
public final class FieldRules {
    private final List<FieldPath> paths;
    private final int fixedValueCount;

    public FieldRules(List<String> texts) {
        List<FieldPath> parsed = new ArrayList<>();
        for (String text : texts) {
            parsed.add(FieldPath.parse(text));
        }
        for (int i = 0; i < parsed.size(); i++) {
            for (FieldPath second : parsed.subList(i + 1, parsed.size())) {
                FieldPath first = parsed.get(i);
                if (first.isPrefixOf(second) || second.isPrefixOf(first)) {
                    throw FieldPath.invalid("field paths '" + first.text() + "' and '" + second.text()
                            + "' overlap; encrypt the outer one only");
                }
            }
        }
        this.paths = Collections.unmodifiableList(parsed);
        int fixed = parsed.size();
        for (FieldPath path : parsed) {
            if (path.segments().contains(null)) {
                fixed = -1; // a [*] step: as many values as the record's arrays hold
            }
        }
        this.fixedValueCount = fixed;
    }

    /**
     * How many values the rules select in any record at most when that is fixed (no {@code [*]} step: each path
     * selects one value or none), else -1 ({@code fixed_value_count} in {@code envelope/json_fields.py}).
     */
    public int fixedValueCount() {
        return fixedValueCount;
    }

    public List<FieldPath> paths() {
        return paths;
    }
}
