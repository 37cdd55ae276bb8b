package io.strongroom.dataplane.json;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** A checked set of field paths to encrypt: parsed, no two overlapping. Compile once per topic. */
public final class FieldRules {
    private final List<FieldPath> paths;

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
    }

    public List<FieldPath> paths() {
        return paths;
    }
}
