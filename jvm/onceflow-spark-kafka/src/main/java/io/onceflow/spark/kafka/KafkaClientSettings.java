package io.onceflow.spark.kafka;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The settings of the writer's Kafka clients: the pipeline's own ({@link
 * SinkTarget#clientSettings()}, already translated to the Java client's names by the driver) under
 * the writer's, which decide its guarantees and so cannot be set by a pipeline.
 */
final class KafkaClientSettings {

    /** Settings the writer owns; a pipeline that sets one is refused, never overridden quietly. */
    private static final Set<String> WRITER_OWNED =
            new TreeSet<>(
                    List.of(
                            ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                            ProducerConfig.TRANSACTION_TIMEOUT_CONFIG,
                            ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
                            ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG,
                            ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
                            ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
                            ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                            ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
                            ConsumerConfig.GROUP_ID_CONFIG,
                            ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG));

    private KafkaClientSettings() {}

    static void checkNotWriterOwned(Set<String> names) {
        Set<String> owned = new TreeSet<>(names);
        owned.retainAll(WRITER_OWNED);
        if (!owned.isEmpty()) {
            throw new IllegalArgumentException(
                    "onceflow-kafka: kafka."
                            + String.join(", kafka.", owned)
                            + " cannot be set: the exactly-once writer sets "
                            + WRITER_OWNED
                            + " itself");
        }
    }

    /**
     * A partition's transactional producer. The first record of a batch lingers 5 ms (as the Python
     * writer's) so the marker and the first rows leave in one request; idempotence is implied by
     * transactions and stated so a pipeline setting cannot turn it off. An executor keeps a
     * producer per output partition between batches, and a Java producer keeps the buffer memory
     * it once used (32 MiB by default): a 4 MiB buffer bounds what the kept producers hold outside
     * Spark's accounting, where the default would let a dozen of them take most of an executor's
     * heap. A producer writes one partition; when its buffer is full, a send waits for the broker.
     */
    static final long BUFFER_BYTES = 4L << 20;

    static Map<String, Object> producer(SinkTarget target, String transactionalId) {
        Map<String, Object> settings = new HashMap<>();
        settings.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        settings.put(ProducerConfig.BUFFER_MEMORY_CONFIG, BUFFER_BYTES);
        settings.putAll(target.clientSettings());
        settings.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        settings.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, target.transactionTimeoutMs());
        settings.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        return settings;
    }

    /**
     * The consumer markers are read back with: read_committed, so it waits out open transactions
     * instead of taking their markers for committed ones; no group (it is assigned and seeks, and
     * commits nothing); a short fetch wait, because the end is known and usually a few records
     * away, and a broker holding each fetch for the default 500 ms would make every marker read
     * cost half a second.
     */
    static Map<String, Object> markerConsumer(SinkTarget target) {
        Map<String, Object> settings = new HashMap<>();
        settings.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 10);
        settings.putAll(target.clientSettings());
        settings.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        settings.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        // A window that starts before the log's start (records deleted) reads from its start.
        settings.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return settings;
    }

    /** The admin client that asks for a marker partition's end. */
    static Map<String, Object> admin(SinkTarget target) {
        return new HashMap<>(target.clientSettings());
    }

    /**
     * A short digest of {@code settings}, for keys of clients kept between tasks: two sinks with
     * other credentials never share a client, and no secret appears in a key.
     */
    static String digest(Map<String, ?> settings) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            new TreeMap<>(settings)
                    .forEach(
                            (name, value) -> {
                                sha.update(name.getBytes(StandardCharsets.UTF_8));
                                sha.update((byte) 0);
                                sha.update(String.valueOf(value).getBytes(StandardCharsets.UTF_8));
                                sha.update((byte) 0);
                            });
            return HexFormat.of().formatHex(sha.digest(), 0, 8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-256", e);
        }
    }
}
