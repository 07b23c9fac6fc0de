package io.onceflow.spark.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/**
 * The marker format, the names and the options, checked against the contract fixture the Python
 * writer's test_sink_marker_contract.py reads too (its path comes from the build): a change on
 * either side fails until both agree, and `mvn package` builds no jar that disagrees.
 */
class MarkerContractTest {

    private static final JsonNode CONTRACT = readContract();

    private static JsonNode readContract() {
        String path = System.getProperty("onceflow.contract.fixture");
        assertNotNull(path, "the build passes the fixture's path as onceflow.contract.fixture");
        try {
            return new ObjectMapper().readTree(Path.of(path).toFile());
        } catch (IOException e) {
            throw new IllegalStateException("cannot read the contract fixture " + path, e);
        }
    }

    private static Stream<DynamicTest> vectors(String section, Consumer<JsonNode> check) {
        JsonNode vectors = CONTRACT.get(section);
        assertFalse(vectors == null || vectors.isEmpty(), "the fixture has no " + section);
        return StreamSupport.stream(vectors.spliterator(), false)
                .map(vector -> DynamicTest.dynamicTest(name(vector), () -> check.accept(vector)));
    }

    private static String name(JsonNode vector) {
        return vector.has("why")
                ? vector.get("why").asText()
                : vector.get("transactionalId").asText();
    }

    private static Optional<SinkMarker> marker(JsonNode fields) {
        if (fields.isTextual() && fields.asText().equals("none")) {
            return Optional.empty();
        }
        JsonNode layout = fields.get("layout");
        return Optional.of(
                new SinkMarker(
                        fields.get("query").isNull() ? null : fields.get("query").asText(),
                        fields.get("batch").asLong(),
                        layout.isNull() ? null : layout(layout)));
    }

    private static Layout layout(JsonNode layout) {
        return new Layout(layout.get("topic").asText(), layout.get("partitions").asInt());
    }

    private static byte[] bytes(JsonNode text) {
        return text.asText().getBytes(StandardCharsets.UTF_8);
    }

    @TestFactory
    Stream<DynamicTest> aMarkerEncodesToExactlyTheContractBytes() {
        return vectors(
                "encode",
                vector ->
                        assertArrayEquals(
                                bytes(vector.get("value")),
                                MarkerCodec.encode(marker(vector.get("marker")).orElseThrow()),
                                () ->
                                        new String(
                                                MarkerCodec.encode(
                                                        marker(vector.get("marker")).orElseThrow()),
                                                StandardCharsets.US_ASCII)));
    }

    @TestFactory
    Stream<DynamicTest> aMarkerValueDecodesAsTheContractSays() {
        return vectors(
                "decode",
                vector -> {
                    byte[] value = bytes(vector.get("value"));
                    JsonNode expected = vector.get("marker");
                    if (expected.isTextual() && expected.asText().equals("error")) {
                        assertThrows(MarkerFormatException.class, () -> MarkerCodec.decode(value));
                    } else {
                        assertEquals(marker(expected), MarkerCodec.decode(value));
                    }
                });
    }

    @TestFactory
    Stream<DynamicTest> aPartitionsIdKeysAndMarkerPartitionAreTheContracts() {
        return vectors(
                "keys",
                vector -> {
                    SinkTarget target =
                            new SinkTarget(
                                    Map.of("bootstrap.servers", "broker:9092"),
                                    "out",
                                    1,
                                    vector.get("markerTopic").asText(),
                                    vector.get("markerPartitions").asInt(),
                                    vector.get("transactionalIdStem").asText(),
                                    "q",
                                    0,
                                    60000,
                                    null);
                    int partition = vector.get("partition").asInt();
                    assertEquals(
                            vector.get("transactionalId").asText(),
                            target.transactionalId(partition));
                    assertArrayEquals(
                            bytes(vector.get("transactionalId")), target.markerKey(partition));
                    assertArrayEquals(
                            bytes(vector.get("legacyKey")), target.legacyMarkerKey(partition));
                    assertEquals(
                            vector.get("markerPartition").asInt(),
                            target.markerPartition(partition));
                });
    }

    @TestFactory
    Stream<DynamicTest> onlyTheSameQueryAndLayoutSkips() {
        return vectors(
                "rules",
                vector ->
                        assertEquals(
                                vector.get("skip").asBoolean(),
                                ReplayRule.alreadyWritten(
                                        marker(vector.get("marker")),
                                        vector.get("query").asText(),
                                        vector.get("batch").asLong(),
                                        layout(vector.get("layout")))));
    }

    @TestFactory
    Stream<DynamicTest> theOptionsParseToTheContractsTarget() {
        return vectors(
                "options",
                vector -> {
                    Map<String, String> given = new TreeMap<>();
                    vector.get("options")
                            .fields()
                            .forEachRemaining(o -> given.put(o.getKey(), o.getValue().asText()));
                    CaseInsensitiveStringMap options = new CaseInsensitiveStringMap(given);
                    JsonNode target = vector.get("target");
                    if (target.isTextual() && target.asText().equals("error")) {
                        assertThrows(
                                IllegalArgumentException.class, () -> SinkTarget.parse(options));
                        return;
                    }
                    Map<String, String> settings = new TreeMap<>();
                    target.get("clientSettings")
                            .fields()
                            .forEachRemaining(s -> settings.put(s.getKey(), s.getValue().asText()));
                    assertEquals(
                            new SinkTarget(
                                    settings,
                                    target.get("topic").asText(),
                                    target.get("partitions").asInt(),
                                    target.get("markerTopic").asText(),
                                    target.get("markerPartitions").asInt(),
                                    target.get("transactionalIdStem").asText(),
                                    target.get("query").asText(),
                                    target.get("batch").asLong(),
                                    target.get("transactionTimeoutMs").asInt(),
                                    target.get("failOnceFlag").isNull()
                                            ? null
                                            : target.get("failOnceFlag").asText()),
                            SinkTarget.parse(options));
                });
    }
}
