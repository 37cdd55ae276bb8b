package io.strongroom.dataplane.schema;

import io.strongroom.dataplane.schema.RecordFormat.Slot;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Finds the present values of targets in a decoded record ({@code target_slots} in
 * {@code strongroom/schemas/fields.py}), step by step: a format says how a step goes from a value to its
 * children ({@link Navigator}). In Avro and JSON records arrays are lists and maps are maps, and only entering a
 * record field differs ({@link #listsAndMaps}); Protobuf messages navigate on their own.
 */
final class TargetWalk {
    /** How one format steps through its decoded records. */
    interface Navigator {
        /** The values {@code step} leads to from {@code node} (none when it does not apply to the node). */
        void children(Object node, FieldTarget.Step step, List<Object> out);

        /** The slots of the values {@code step} leads to from {@code node}: the last step of a target. */
        void slots(Object node, FieldTarget.Step step, FieldTarget target, List<Slot> out);
    }

    /** How a format enters a record field: the field's slot in {@code node}, or null when it is not there. */
    @FunctionalInterface
    interface FieldStep {
        Slot slot(Object node, FieldTarget.Step step, FieldTarget target);
    }

    private TargetWalk() {
    }

    /** Records of lists and maps whose record fields {@code fields} enters. */
    static Navigator listsAndMaps(FieldStep fields) {
        return new Navigator() {
            @Override
            public void children(Object node, FieldTarget.Step step, List<Object> out) {
                TargetWalk.children(node, step, fields, out);
            }

            @Override
            public void slots(Object node, FieldTarget.Step step, FieldTarget target, List<Slot> out) {
                lastSlots(node, step, target, fields, out);
            }
        };
    }

    static List<Slot> slots(Object root, List<FieldTarget> targets, Navigator navigator) {
        List<Slot> found = new ArrayList<>();
        for (FieldTarget target : targets) {
            List<FieldTarget.Step> steps = target.steps();
            List<Object> nodes = List.of(root);
            for (FieldTarget.Step step : steps.subList(0, steps.size() - 1)) {
                List<Object> next = new ArrayList<>();
                for (Object node : nodes) {
                    navigator.children(node, step, next);
                }
                nodes = next;
            }
            FieldTarget.Step last = steps.get(steps.size() - 1);
            for (Object node : nodes) {
                navigator.slots(node, last, target, found);
            }
        }
        return found;
    }

    private static void children(Object node, FieldTarget.Step step, FieldStep fields, List<Object> out) {
        switch (step.kind()) {
            case FIELD -> {
                Slot field = fields.slot(node, step, null);
                if (field != null) {
                    out.add(field.get());
                }
            }
            case ITEMS -> {
                if (node instanceof List<?> list) {
                    out.addAll(list);
                }
            }
            case VALUES -> {
                if (node instanceof Map<?, ?> map) {
                    out.addAll(map.values());
                }
            }
            default -> throw new IllegalStateException("unknown step " + step);
        }
    }

    @SuppressWarnings("unchecked")
    private static void lastSlots(Object node, FieldTarget.Step step, FieldTarget target, FieldStep fields,
            List<Slot> out) {
        switch (step.kind()) {
            case FIELD -> {
                Slot field = fields.slot(node, step, target);
                if (field != null) {
                    out.add(field);
                }
            }
            case ITEMS -> {
                if (node instanceof List<?> list) {
                    for (int i = 0; i < list.size(); i++) {
                        out.add(new ItemSlot((List<Object>) list, i, target));
                    }
                }
            }
            case VALUES -> {
                if (node instanceof Map<?, ?> map) {
                    for (Object key : List.copyOf(map.keySet())) {
                        out.add(new ValueSlot((Map<Object, Object>) map, key, target));
                    }
                }
            }
            default -> throw new IllegalStateException("unknown step " + step);
        }
    }

    private record ItemSlot(List<Object> list, int index, FieldTarget target) implements Slot {
        public Object get() {
            return list.get(index);
        }

        public void set(Object value) {
            list.set(index, value);
        }
    }

    /** A map value, or a JSON object's member. */
    record ValueSlot(Map<Object, Object> map, Object key, FieldTarget target) implements Slot {
        public Object get() {
            return map.get(key);
        }

        public void set(Object value) {
            map.put(key, value);
        }
    }
}
