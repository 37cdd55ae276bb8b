package io.strongroom.dataplane.schema;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.MessageOrBuilder;
import io.strongroom.dataplane.codec.EnvelopeException;
import io.strongroom.dataplane.codec.ErrorKind;
import io.strongroom.dataplane.schema.RecordFormat.Slot;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One Protobuf schema ({@code protobuf_format.py}): the driver compiles the registry's {@code .proto} text with
 * protoc and sends the {@code FileDescriptorSet} and, per message (by its Confluent message indexes), the fields to
 * seal or why the rule cannot apply. A payload starts with the message indexes (kept byte for byte), then the
 * message, read with protobuf-java's {@link DynamicMessage}; a message with fields its schema does not declare is
 * refused (an unknown field could carry personal data past the seal). Map entries are put in key order when read,
 * visited and written back in it, as the Python side does ({@link #sortedMaps}).
 */
final class ProtobufFormat implements RecordFormat {
    private static final int MAX_INDEXES = 100;

    /** What the driver says of one message: the targets, or (not null) the refusal its records fail with. */
    record MessageTargets(List<FieldTarget> targets, EnvelopeException refusal) {
    }

    /** A message of the schema: its descriptor and what the driver said of it. */
    private record MessagePlan(Descriptor descriptor, MessageTargets said) {
    }

    /** A decoded record: the index bytes, the message being edited, and its targets. */
    private static final class Record {
        final byte[] indexBytes;
        final Message.Builder root;
        final List<FieldTarget> targets;
        /**
         * Builders of map values that are messages, by map, in the order they were made (an inner map after the
         * map holding it): written back into their entries before encoding, the last made first.
         */
        final Map<MapNode, List<Message.Builder>> mapValues = new LinkedHashMap<>();

        Record(byte[] indexBytes, Message.Builder root, List<FieldTarget> targets) {
            this.indexBytes = indexBytes;
            this.root = root;
            this.targets = targets;
        }
    }

    private final String where;
    private final Map<String, MessagePlan> messages = new HashMap<>();
    private final FileDescriptor file;

    /**
     * @param descriptors the compiled {@code FileDescriptorSet} (the schema's file and its imports)
     * @param fileName    the schema's own file in it
     * @param plans       per dotted message indexes ({@code "0.1"}): the targets, or the refusal
     */
    ProtobufFormat(byte[] descriptors, String fileName, Map<String, MessageTargets> plans, String where) {
        this.where = where;
        try {
            Map<String, FileDescriptorProto> protos = new HashMap<>();
            for (FileDescriptorProto proto : FileDescriptorSet.parseFrom(descriptors).getFileList()) {
                protos.put(proto.getName(), proto);
            }
            this.file = build(fileName, protos, new HashMap<>());
        } catch (InvalidProtocolBufferException | DescriptorValidationException | RuntimeException e) {
            throw new EnvelopeException(ErrorKind.UNSUPPORTED_SCHEMA,
                    where + " has descriptors protobuf-java cannot read: " + e.getClass().getSimpleName());
        }
        for (Map.Entry<String, MessageTargets> plan : plans.entrySet()) {
            Descriptor descriptor = find(indexesOf(plan.getKey()));
            if (descriptor != null) {
                messages.put(plan.getKey(), new MessagePlan(descriptor, plan.getValue()));
            }
        }
    }

    private static FileDescriptor build(String name, Map<String, FileDescriptorProto> protos,
            Map<String, FileDescriptor> built) throws DescriptorValidationException {
        FileDescriptor done = built.get(name);
        if (done != null) {
            return done;
        }
        FileDescriptorProto proto = protos.get(name);
        if (proto == null) {
            throw new IllegalArgumentException("missing file " + name);
        }
        List<FileDescriptor> dependencies = new ArrayList<>();
        for (String dependency : proto.getDependencyList()) {
            dependencies.add(build(dependency, protos, built));
        }
        FileDescriptor file = FileDescriptor.buildFrom(proto, dependencies.toArray(new FileDescriptor[0]));
        built.put(name, file);
        return file;
    }

    private static List<Integer> indexesOf(String key) {
        List<Integer> indexes = new ArrayList<>();
        for (String part : key.split("\\.", -1)) {
            indexes.add(Integer.parseInt(part));
        }
        return indexes;
    }

    /** The message the indexes name (nested types, map entries included, as protoc numbers them), or null. */
    private Descriptor find(List<Integer> indexes) {
        List<Descriptor> level = file.getMessageTypes();
        Descriptor found = null;
        for (int index : indexes) {
            if (index >= level.size()) {
                return null;
            }
            found = level.get(index);
            level = found.getNestedTypes();
        }
        return found;
    }

    // ------------------------------------------------------------------ payloads

    @Override
    public Object decode(byte[] value, int offset) {
        int[] pos = {offset};
        long count = zigzag(value, pos);
        if (count < 0 || count > MAX_INDEXES) {
            throw mismatch("Protobuf payload names " + count + " message indexes");
        }
        List<Integer> indexes = new ArrayList<>();
        for (long i = 0; i < count; i++) {
            long index = zigzag(value, pos);
            if (index < 0) {
                throw mismatch("Protobuf payload names the negative message index " + index);
            }
            indexes.add(index > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) index);
        }
        if (indexes.isEmpty()) {
            indexes.add(0);
        }
        StringBuilder key = new StringBuilder();
        for (int index : indexes) {
            key.append(key.isEmpty() ? "" : ".").append(index);
        }
        MessagePlan plan = messages.get(key.toString());
        if (plan == null) {
            throw mismatch("Protobuf message indexes " + indexes + " name no message of " + where);
        }
        EnvelopeException refusal = plan.said().refusal();
        if (refusal != null) {
            throw new EnvelopeException(refusal.kind(), refusal.problem());
        }
        DynamicMessage message;
        try {
            message = DynamicMessage.parseFrom(plan.descriptor(),
                    CodedInputStream.newInstance(value, pos[0], value.length - pos[0]));
        } catch (IOException | RuntimeException e) {
            throw mismatch("payload does not read as " + where + ": DecodeError"); // the Python runtime's name
        }
        if (hasUnknownFields(message)) {
            throw mismatch("payload has fields " + where + " does not declare (unknown fields)");
        }
        return new Record(Arrays.copyOfRange(value, offset, pos[0]), sortedMaps(message).toBuilder(),
                plan.said().targets());
    }

    /**
     * {@code message} with the entries of every map in the order the Python side writes them
     * ({@code SerializeToString(deterministic=True)}, upb's order: strings by UTF-8 bytes, which is code point
     * order, with a longer string before its own prefix; integers by descending unsigned value; true before false)
     * and visits them ({@code _written_order} in {@code fields.py}). Values are then sealed in one order on both
     * engines and written in it. A key the payload gives twice keeps its last value, as every protobuf runtime reads
     * it (Python's too), so the earlier value is neither sealed nor written back.
     */
    private static Message sortedMaps(Message message) {
        Message.Builder changed = null;
        for (Map.Entry<FieldDescriptor, Object> entry : message.getAllFields().entrySet()) {
            FieldDescriptor field = entry.getKey();
            if (field.getJavaType() != FieldDescriptor.JavaType.MESSAGE) {
                continue;
            }
            if (!field.isRepeated()) {
                Message child = (Message) entry.getValue();
                Message sorted = sortedMaps(child);
                if (sorted != child) {
                    changed = changed != null ? changed : message.toBuilder();
                    changed.setField(field, sorted);
                }
                continue;
            }
            List<?> items = (List<?>) entry.getValue();
            List<Message> sorted = new ArrayList<>(items.size());
            boolean differs = false;
            for (Object item : items) {
                Message child = sortedMaps((Message) item);
                differs |= child != item;
                sorted.add(child);
            }
            if (field.isMapField()) {
                FieldDescriptor key = field.getMessageType().findFieldByName("key");
                Map<Object, Message> byKey = new LinkedHashMap<>(); // a key given twice: the last one counts
                for (Message item : sorted) {
                    byKey.remove(item.getField(key));
                    byKey.put(item.getField(key), item);
                }
                List<Message> unique = new ArrayList<>(byKey.values());
                unique.sort((a, b) -> compareKeys(a.getField(key), b.getField(key), key));
                for (int i = 0; !differs && i < unique.size(); i++) {
                    differs = unique.size() != sorted.size() || unique.get(i) != sorted.get(i);
                }
                differs |= unique.size() != sorted.size();
                sorted = unique;
            }
            if (differs) {
                changed = changed != null ? changed : message.toBuilder();
                changed.clearField(field);
                for (Message item : sorted) {
                    changed.addRepeatedField(field, item);
                }
            }
        }
        return changed == null ? message : changed.buildPartial();
    }

    private static int compareKeys(Object a, Object b, FieldDescriptor key) {
        return switch (key.getType()) {
            case STRING -> compareCodePoints((String) a, (String) b);
            case BOOL -> Boolean.compare((Boolean) b, (Boolean) a);
            case INT32, SINT32, SFIXED32, UINT32, FIXED32 -> Long.compareUnsigned((Integer) b, (Integer) a);
            default -> Long.compareUnsigned((Long) b, (Long) a);
        };
    }

    private static int compareCodePoints(String a, String b) {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int x = a.codePointAt(i);
            int y = b.codePointAt(j);
            if (x != y) {
                return Integer.compare(x, y);
            }
            i += Character.charCount(x);
            j += Character.charCount(y);
        }
        return Integer.compare(b.length() - j, a.length() - i); // a longer string first
    }

    /** A zigzag varint ({@code _read_varint}): the Confluent message indexes are written that way. */
    private static long zigzag(byte[] value, int[] pos) {
        long result = 0;
        int shift = 0;
        while (true) {
            if (pos[0] >= value.length || shift > 63) {
                throw mismatch("Protobuf payload ends inside its message indexes");
            }
            byte b = value[pos[0]++];
            result |= (long) (b & 0x7F) << shift;
            shift += 7;
            if ((b & 0x80) == 0) {
                return (result >>> 1) ^ -(result & 1);
            }
        }
    }

    private static boolean hasUnknownFields(MessageOrBuilder message) {
        if (!message.getUnknownFields().asMap().isEmpty()) {
            return true;
        }
        for (Map.Entry<FieldDescriptor, Object> field : message.getAllFields().entrySet()) {
            if (field.getKey().getJavaType() != FieldDescriptor.JavaType.MESSAGE) {
                continue;
            }
            List<?> values = field.getKey().isRepeated() ? (List<?>) field.getValue() : List.of(field.getValue());
            for (Object child : values) {
                if (hasUnknownFields((MessageOrBuilder) child)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** A message is valid for its schema once read. */
    @Override
    public void validate(Object datum) {
    }

    @Override
    public byte[] encode(byte[] header, Object datum) {
        Record record = (Record) datum;
        List<Map.Entry<MapNode, List<Message.Builder>>> made = new ArrayList<>(record.mapValues.entrySet());
        for (int m = made.size() - 1; m >= 0; m--) { // inner maps first
            List<Message.Builder> values = made.get(m).getValue();
            for (int i = 0; i < values.size(); i++) {
                made.get(m).getKey().setValue(i, values.get(i).buildPartial());
            }
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(256);
        out.writeBytes(header);
        out.writeBytes(record.indexBytes);
        try {
            CodedOutputStream coded = CodedOutputStream.newInstance(out); // maps stay in their sorted order
            record.root.buildPartial().writeTo(coded);
            coded.flush();
        } catch (IOException | RuntimeException e) {
            throw mismatch("record cannot be written back as " + where + ": " + e.getClass().getSimpleName());
        }
        return out.toByteArray();
    }

    private static EnvelopeException mismatch(String problem) {
        return new EnvelopeException(ErrorKind.PAYLOAD_MISMATCH, problem);
    }

    // ------------------------------------------------------------------ targets

    /** The record's own targets (they depend on its message); the plan's are empty for Protobuf. */
    @Override
    public List<Slot> slots(Object root, List<FieldTarget> ignored) {
        Record record = (Record) root;
        return TargetWalk.slots(record.root, record.targets, new Navigator(record));
    }

    /** A repeated field or a map of a message, as a step sees it. */
    private record RepeatedNode(Message.Builder owner, FieldDescriptor field) {
    }

    private record MapNode(Message.Builder owner, FieldDescriptor field) {
        FieldDescriptor valueField() {
            return field.getMessageType().findFieldByName("value");
        }

        Message entry(int index) {
            return (Message) owner.getRepeatedField(field, index);
        }

        void setValue(int index, Object value) {
            owner.setRepeatedField(field, index, entry(index).toBuilder().setField(valueField(), value).build());
        }

        /** Distinct maps of one record: a key by identity of the owner (builders compare by content). */
        @Override
        public boolean equals(Object other) {
            return other instanceof MapNode node && node.owner == owner && node.field.equals(field);
        }

        @Override
        public int hashCode() {
            return System.identityHashCode(owner) * 31 + field.getNumber();
        }
    }

    /** {@code _children} and {@code _last_slots} of {@code fields.py} for protobuf messages and their containers. */
    private static final class Navigator implements TargetWalk.Navigator {
        private final Record record;

        Navigator(Record record) {
            this.record = record;
        }

        @Override
        public void children(Object node, FieldTarget.Step step, List<Object> out) {
            switch (step.kind()) {
                case FIELD -> {
                    FieldDescriptor field = fieldOf(node, step);
                    if (field == null) {
                        return;
                    }
                    Message.Builder message = (Message.Builder) node;
                    if (field.isMapField()) {
                        out.add(new MapNode(message, field));
                    } else if (field.isRepeated()) {
                        out.add(new RepeatedNode(message, field));
                    } else if (field.getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
                        if (message.hasField(field)) { // an unset message: nothing to seal, and it stays unset
                            out.add(message.getFieldBuilder(field));
                        }
                    } else {
                        out.add(message.getField(field));
                    }
                }
                case ITEMS -> {
                    if (node instanceof RepeatedNode items) {
                        boolean messages = items.field().getJavaType() == FieldDescriptor.JavaType.MESSAGE;
                        for (int i = 0; i < items.owner().getRepeatedFieldCount(items.field()); i++) {
                            out.add(messages ? items.owner().getRepeatedFieldBuilder(items.field(), i)
                                    : items.owner().getRepeatedField(items.field(), i));
                        }
                    }
                }
                case VALUES -> {
                    if (node instanceof MapNode map) {
                        if (map.valueField().getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
                            out.addAll(valueBuilders(map));
                        } else {
                            for (int i = 0; i < map.owner().getRepeatedFieldCount(map.field()); i++) {
                                out.add(map.entry(i).getField(map.valueField()));
                            }
                        }
                    }
                }
                default -> throw new IllegalStateException("unknown step " + step);
            }
        }

        /** Editable builders of a map's message values, made once per map and written back before encoding. */
        private List<Message.Builder> valueBuilders(MapNode map) {
            List<Message.Builder> builders = record.mapValues.get(map);
            if (builders == null) {
                List<Message.Builder> made = new ArrayList<>();
                for (int i = 0; i < map.owner().getRepeatedFieldCount(map.field()); i++) {
                    made.add(((Message) map.entry(i).getField(map.valueField())).toBuilder());
                }
                record.mapValues.put(map, made);
                builders = made;
            }
            return builders;
        }

        @Override
        public void slots(Object node, FieldTarget.Step step, FieldTarget target, List<Slot> out) {
            switch (step.kind()) {
                case FIELD -> {
                    FieldDescriptor field = fieldOf(node, step);
                    // an unset optional field or oneof member: nothing to seal, and setting it would clear the
                    // member of its oneof that is set
                    if (field != null && !(field.hasPresence() && !field.isRepeated()
                            && !((Message.Builder) node).hasField(field))) {
                        out.add(new FieldSlot((Message.Builder) node, field, target));
                    }
                }
                case ITEMS -> {
                    if (node instanceof RepeatedNode items) {
                        for (int i = 0; i < items.owner().getRepeatedFieldCount(items.field()); i++) {
                            out.add(new ItemSlot(items, i, target));
                        }
                    }
                }
                case VALUES -> {
                    if (node instanceof MapNode map) {
                        for (int i = 0; i < map.owner().getRepeatedFieldCount(map.field()); i++) {
                            out.add(new MapValueSlot(map, i, target));
                        }
                    }
                }
                default -> throw new IllegalStateException("unknown step " + step);
            }
        }

        private static FieldDescriptor fieldOf(Object node, FieldTarget.Step step) {
            return node instanceof Message.Builder message
                    ? message.getDescriptorForType().findFieldByName(step.name()) : null;
        }
    }

    /** A string as a String, bytes as a read-only buffer (what the codec seals); back again when set. */
    private static Object outward(Object value) {
        return value instanceof ByteString bytes ? bytes.asReadOnlyByteBuffer() : value;
    }

    private static Object inward(Object value) {
        return value instanceof ByteBuffer buffer ? ByteString.copyFrom(buffer.duplicate()) : value;
    }

    private record FieldSlot(Message.Builder message, FieldDescriptor field, FieldTarget target) implements Slot {
        public Object get() {
            return outward(message.getField(field));
        }

        public void set(Object value) {
            if (value == null) {
                message.clearField(field);
            } else {
                message.setField(field, inward(value));
            }
        }
    }

    private record ItemSlot(RepeatedNode items, int index, FieldTarget target) implements Slot {
        public Object get() {
            return outward(items.owner().getRepeatedField(items.field(), index));
        }

        public void set(Object value) {
            items.owner().setRepeatedField(items.field(), index, inward(value));
        }
    }

    private record MapValueSlot(MapNode map, int index, FieldTarget target) implements Slot {
        public Object get() {
            return outward(map.entry(index).getField(map.valueField()));
        }

        public void set(Object value) {
            map.setValue(index, inward(value));
        }
    }

    // ------------------------------------------------------------------ subject

    /** A string as it is, an integer or enum number as its decimal text; null when absent or of another type. */
    @Override
    public String subject(Object root, String path) {
        Object node = ((Record) root).root;
        FieldDescriptor field = null;
        for (String name : path.substring(2).split("\\.", -1)) {
            if (!(node instanceof MessageOrBuilder message)) {
                return null;
            }
            field = message.getDescriptorForType().findFieldByName(name);
            if (field == null) {
                return null;
            }
            node = message.getField(field);
        }
        if (field == null || field.isRepeated()) {
            return null;
        }
        return switch (field.getType()) {
            case STRING -> (String) node;
            case UINT32, FIXED32 -> Integer.toUnsignedString((Integer) node);
            case UINT64, FIXED64 -> Long.toUnsignedString((Long) node);
            case INT32, SINT32, SFIXED32, INT64, SINT64, SFIXED64 -> node.toString();
            case ENUM -> Integer.toString(((EnumValueDescriptor) node).getNumber());
            default -> null;
        };
    }

    @Override
    public String typeName(Object value) {
        return value.getClass().getSimpleName();
    }
}
