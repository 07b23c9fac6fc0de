package io.onceflow.spark.kafka;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * Everything an executor needs to write one batch, parsed from the write's options (contract
 * version {@value #CONTRACT}). The Python driver resolves every name (the transactional id stem,
 * the marker topic and its partition count) and passes them: naming stays defined once, in Python,
 * and this side only appends the partition number.
 *
 * @param clientSettings the Java client settings of the pipeline ({@code kafka.*} options without
 *     the prefix, {@code bootstrap.servers} among them), given to every client
 * @param failOnceFlag the chaos drill's flag file, null when the drill is off
 */
record SinkTarget(
        Map<String, String> clientSettings,
        String topic,
        int partitions,
        String markerTopic,
        int markerPartitions,
        String transactionalIdStem,
        String query,
        long batch,
        int transactionTimeoutMs,
        String failOnceFlag)
        implements Serializable {

    /**
     * Bumped with any change of the option names or meanings: the jar and the driver must agree.
     */
    private static final int CONTRACT = 1;

    private static final String KAFKA_PREFIX = "kafka.";
    private static final String BOOTSTRAP_SERVERS = "bootstrap.servers";
    private static final String OPTION_CONTRACT = "contract";
    private static final String OPTION_TOPIC = "topic";
    private static final String OPTION_PARTITIONS = "partitions";
    private static final String OPTION_MARKER_TOPIC = "markerTopic";
    private static final String OPTION_MARKER_PARTITIONS = "markerPartitions";
    private static final String OPTION_TRANSACTIONAL_ID_STEM = "transactionalIdStem";
    private static final String OPTION_QUERY = "query";
    private static final String OPTION_BATCH = "batch";
    private static final String OPTION_TRANSACTION_TIMEOUT_MS = "transactionTimeoutMs";
    private static final String OPTION_FAIL_ONCE_FLAG = "failOnceFlag";

    private static final Set<String> OPTIONS =
            new TreeSet<>(
                    List.of(
                            OPTION_CONTRACT,
                            OPTION_TOPIC,
                            OPTION_PARTITIONS,
                            OPTION_MARKER_TOPIC,
                            OPTION_MARKER_PARTITIONS,
                            OPTION_TRANSACTIONAL_ID_STEM,
                            OPTION_QUERY,
                            OPTION_BATCH,
                            OPTION_TRANSACTION_TIMEOUT_MS,
                            OPTION_FAIL_ONCE_FLAG));

    /** The option names as Spark hands them over: its option map is lower-cased. */
    private static final Set<String> LOWER_CASE_OPTIONS =
            OPTIONS.stream().map(name -> name.toLowerCase(Locale.ROOT)).collect(Collectors.toSet());

    SinkTarget {
        clientSettings = Map.copyOf(clientSettings);
    }

    /**
     * The target the options describe. Refuses, on the driver and before any task starts, an option
     * it does not know (a misspelt name would otherwise be a silently ignored setting) and a client
     * setting the writer must own (a second transactional id would void fencing).
     */
    static SinkTarget parse(CaseInsensitiveStringMap options) {
        long contract = number(options, OPTION_CONTRACT);
        if (contract != CONTRACT) {
            throw new IllegalArgumentException(
                    "onceflow-kafka: the driver speaks options contract "
                            + contract
                            + ", this jar "
                            + CONTRACT
                            + ": the jar and the Onceflow Python package come from different"
                            + " builds");
        }
        Map<String, String> settings = new TreeMap<>();
        for (Map.Entry<String, String> option : options.entrySet()) {
            String name = option.getKey();
            if (name.startsWith(KAFKA_PREFIX)) {
                settings.put(name.substring(KAFKA_PREFIX.length()), option.getValue());
            } else if (!LOWER_CASE_OPTIONS.contains(name)) {
                throw new IllegalArgumentException(
                        "onceflow-kafka: unknown option '"
                                + name
                                + "'; known: "
                                + OPTIONS
                                + " and kafka.*");
            }
        }
        KafkaClientSettings.checkNotWriterOwned(settings.keySet());
        if (!settings.containsKey(BOOTSTRAP_SERVERS)) {
            throw missing(KAFKA_PREFIX + BOOTSTRAP_SERVERS);
        }
        long batch = number(options, OPTION_BATCH);
        if (batch < 0) {
            throw new IllegalArgumentException("onceflow-kafka: option batch is " + batch);
        }
        return new SinkTarget(
                settings,
                text(options, OPTION_TOPIC),
                count(options, OPTION_PARTITIONS),
                text(options, OPTION_MARKER_TOPIC),
                count(options, OPTION_MARKER_PARTITIONS),
                text(options, OPTION_TRANSACTIONAL_ID_STEM),
                text(options, OPTION_QUERY),
                batch,
                count(options, OPTION_TRANSACTION_TIMEOUT_MS),
                options.get(OPTION_FAIL_ONCE_FLAG));
    }

    private static String text(CaseInsensitiveStringMap options, String name) {
        String value = options.get(name);
        if (value == null || value.isEmpty()) {
            throw missing(name);
        }
        return value;
    }

    private static long number(CaseInsensitiveStringMap options, String name) {
        String value = text(options, name);
        try {
            return Long.parseLong(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                    "onceflow-kafka: option " + name + " is '" + value + "', not a number", e);
        }
    }

    private static int count(CaseInsensitiveStringMap options, String name) {
        long value = number(options, name);
        if (value < 1 || value > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(
                    "onceflow-kafka: option " + name + " is " + value + ", not a positive int");
        }
        return (int) value;
    }

    private static IllegalArgumentException missing(String name) {
        return new IllegalArgumentException("onceflow-kafka: option " + name + " is required");
    }

    Optional<String> chaosFlag() {
        return Optional.ofNullable(failOnceFlag);
    }

    Layout layout() {
        return new Layout(topic, partitions);
    }

    /** The marker this batch commits with every partition it writes. */
    SinkMarker marker() {
        return new SinkMarker(query, batch, layout());
    }

    /** One id per output partition: the next attempt at a partition fences every earlier one. */
    String transactionalId(int partition) {
        return transactionalIdStem + partition;
    }

    /** The partition's marker key: its transactional id, unique across jobs and prefixes. */
    byte[] markerKey(int partition) {
        return transactionalId(partition).getBytes(StandardCharsets.UTF_8);
    }

    /** The key markers had before keys named the id: the bare partition number. */
    byte[] legacyMarkerKey(int partition) {
        return Integer.toString(partition).getBytes(StandardCharsets.US_ASCII);
    }

    /**
     * The marker topic's partition output partition {@code partition}'s markers go to: the marker
     * topic keeps its first layout's partition count through every re-partition.
     */
    int markerPartition(int partition) {
        return partition % markerPartitions;
    }
}
