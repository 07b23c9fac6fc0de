package io.onceflow.spark.kafka;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * A marker's record value. Encoding is byte for byte what the Python writer's {@code json.dumps}
 * produces (key order query, batch, layout; separators {@code ", "} and {@code ": "}; everything
 * outside printable ASCII escaped as lowercase {@code \\uXXXX}), so the two writers' markers
 * compact into one another and a golden test can compare bytes. Decoding accepts every shape a
 * writer ever produced (a bare batch id, null query or layout, any spacing or key order) and
 * refuses anything else; tests/fixtures/sink_marker_contract.json pins both directions for both
 * languages.
 */
final class MarkerCodec {

    private static final ObjectMapper JSON =
            new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    /** What Python's {@code int()} takes from a string that a writer could have produced. */
    private static final Pattern DECIMAL = Pattern.compile("[+-]?[0-9]+");

    private MarkerCodec() {}

    static byte[] encode(SinkMarker marker) {
        StringBuilder json = new StringBuilder(128).append("{\"query\": ");
        appendString(json, marker.query());
        json.append(", \"batch\": ").append(marker.batch()).append(", \"layout\": ");
        Layout layout = marker.layout();
        if (layout == null) {
            json.append("null");
        } else {
            json.append("{\"topic\": ");
            appendString(json, layout.topic());
            json.append(", \"partitions\": ").append(layout.partitions()).append('}');
        }
        return json.append('}').toString().getBytes(StandardCharsets.US_ASCII);
    }

    /** Python's escaping with {@code ensure_ascii}: Java's UTF-16 units are Python's too. */
    private static void appendString(StringBuilder json, String text) {
        if (text == null) {
            json.append("null");
            return;
        }
        json.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> json.append("\\\"");
                case '\\' -> json.append("\\\\");
                case '\n' -> json.append("\\n");
                case '\r' -> json.append("\\r");
                case '\t' -> json.append("\\t");
                case '\b' -> json.append("\\b");
                case '\f' -> json.append("\\f");
                default -> {
                    if (c < ' ' || c > '~') {
                        json.append(String.format("\\u%04x", (int) c));
                    } else {
                        json.append(c);
                    }
                }
            }
        }
        json.append('"');
    }

    /** The marker in a marker record's value; empty for a tombstone (an empty value). */
    static Optional<SinkMarker> decode(byte[] value) {
        if (value == null || value.length == 0) {
            return Optional.empty();
        }
        String text = new String(value, StandardCharsets.UTF_8);
        JsonNode root;
        try {
            root = JSON.readTree(value);
        } catch (JsonProcessingException e) {
            throw new MarkerFormatException("not JSON", text, e);
        } catch (java.io.IOException e) {
            throw new MarkerFormatException("unreadable", text, e);
        }
        if (root.isIntegralNumber() && root.canConvertToLong()) {
            return Optional.of(new SinkMarker(null, root.longValue(), null)); // a bare batch id
        }
        if (!root.isObject()) {
            throw new MarkerFormatException("neither an object nor a batch id", text, null);
        }
        JsonNode query = root.get("query");
        if (query == null || !(query.isNull() || query.isTextual())) {
            throw new MarkerFormatException("no query (a string or null)", text, null);
        }
        return Optional.of(
                new SinkMarker(
                        query.isNull() ? null : query.textValue(),
                        integer(root.get("batch"), "batch", text),
                        layout(root.get("layout"), text)));
    }

    private static Layout layout(JsonNode layout, String text) {
        if (layout == null || layout.isNull() || (layout.isObject() && layout.isEmpty())) {
            return null; // Python reads a falsy layout as none
        }
        JsonNode topic = layout.get("topic");
        if (!layout.isObject() || topic == null || !topic.isTextual()) {
            throw new MarkerFormatException("a layout without a topic", text, null);
        }
        long partitions = integer(layout.get("partitions"), "layout partitions", text);
        if (partitions != (int) partitions) {
            throw new MarkerFormatException("layout partitions out of range", text, null);
        }
        return new Layout(topic.textValue(), (int) partitions);
    }

    private static long integer(JsonNode node, String what, String text) {
        if (node != null && node.isIntegralNumber() && node.canConvertToLong()) {
            return node.longValue();
        }
        if (node != null
                && node.isTextual()
                && DECIMAL.matcher(node.textValue().strip()).matches()) {
            try {
                return Long.parseLong(node.textValue().strip());
            } catch (NumberFormatException e) {
                throw new MarkerFormatException(what + " out of range", text, e);
            }
        }
        throw new MarkerFormatException("no " + what + " (an integer)", text, null);
    }
}
