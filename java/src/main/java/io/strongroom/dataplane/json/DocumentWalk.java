package io.strongroom.dataplane.json;

import io.strongroom.dataplane.codec.WireIds;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;

/**
 * The two ways of finding places in a parsed document, in the same order as the Python codec (so that
 * when several fields are bad, both engines report the same first one): the present values a set of rules
 * selects ({@code _rule_slots}), and every {@code sr1:} string ({@code _find_sealed}, depth-first with a
 * stack, member and element order inside each container).
 */
final class DocumentWalk {
    private DocumentWalk() {
    }

    static List<Slot> ruleSlots(Map<String, Object> document, FieldRules rules) {
        List<Slot> slots = new ArrayList<>();
        for (FieldPath path : rules.paths()) {
            List<String> segments = path.segments();
            List<Object> nodes = List.of(document);
            for (String segment : segments.subList(0, segments.size() - 1)) {
                nodes = step(nodes, segment);
            }
            String last = segments.get(segments.size() - 1);
            for (Object node : nodes) {
                addSlots(slots, node, last, path.text());
            }
        }
        return slots;
    }

    private static List<Object> step(List<Object> nodes, String segment) {
        List<Object> found = new ArrayList<>();
        for (Object node : nodes) {
            if (segment == null) {
                if (node instanceof List<?> array) {
                    found.addAll(array);
                }
            } else if (node instanceof Map<?, ?> object && object.containsKey(segment)) {
                found.add(object.get(segment));
            }
        }
        return found;
    }

    private static void addSlots(List<Slot> slots, Object node, String segment, String path) {
        if (segment == null) {
            if (node instanceof List<?> array) {
                for (int i = 0; i < array.size(); i++) {
                    slots.add(new Slot(node, i, path));
                }
            }
        } else if (node instanceof Map<?, ?> object && object.containsKey(segment)) {
            slots.add(new Slot(node, segment, path));
        }
    }

    /** A container still to visit and the path segments that lead to it. */
    private record Pending(Object node, List<String> segments) {
    }

    static List<Slot> sealedStrings(Map<String, Object> document) {
        List<Slot> found = new ArrayList<>();
        Deque<Pending> stack = new ArrayDeque<>();
        stack.push(new Pending(document, List.of()));
        while (!stack.isEmpty()) {
            Pending pending = stack.pop();
            if (pending.node() instanceof Map<?, ?> object) {
                for (Map.Entry<?, ?> member : object.entrySet()) {
                    visit(found, stack, pending, member.getValue(), member.getKey(), (String) member.getKey());
                }
            } else {
                List<?> array = (List<?>) pending.node();
                for (int i = 0; i < array.size(); i++) {
                    visit(found, stack, pending, array.get(i), i, null);
                }
            }
        }
        return found;
    }

    private static void visit(List<Slot> found, Deque<Pending> stack, Pending parent, Object child, Object key,
            String segment) {
        if (child instanceof String text) {
            if (text.startsWith(WireIds.FIELD_PREFIX)) {
                found.add(new Slot(parent.node(), key, FieldPath.render(extend(parent.segments(), segment))));
            }
        } else if (child instanceof Map<?, ?> || child instanceof List<?>) {
            stack.push(new Pending(child, extend(parent.segments(), segment)));
        }
    }

    private static List<String> extend(List<String> segments, String segment) {
        List<String> longer = new ArrayList<>(segments);
        longer.add(segment);
        return longer;
    }
}
