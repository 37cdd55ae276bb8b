package io.strongroom.dataplane.json;

import java.util.List;
import java.util.Map;

/** A place in a parsed document: an object and a member name, or an array and an index; with its path text. */
record Slot(Object container, Object key, String path) {
    @SuppressWarnings("unchecked")
    Object get() {
        return container instanceof Map<?, ?> object ? object.get(key) : ((List<Object>) container).get((Integer) key);
    }

    @SuppressWarnings("unchecked")
    void set(Object value) {
        if (container instanceof Map<?, ?>) {
            ((Map<String, Object>) container).put((String) key, value);
        } else {
            ((List<Object>) container).set((Integer) key, value);
        }
    }
}
