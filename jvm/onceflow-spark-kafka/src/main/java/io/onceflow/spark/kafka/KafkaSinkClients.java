package io.onceflow.spark.kafka;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.time.Duration;
import java.util.Optional;

/**
 * The executor's Kafka clients, one set per JVM: every task of every sink on this executor takes
 * producers and marker readers from here and gives them back, and a JVM shutdown closes what is
 * left.
 */
final class KafkaSinkClients implements SinkClients {

    /**
     * Ten minutes without a batch for a partition here: it has most likely moved to another
     * executor. A cap per executor, since each producer is a thread and broker connections.
     */
    private static final Duration IDLE_LIMIT = Duration.ofMinutes(10);

    private static final int HELD_PRODUCERS = 512;

    /** Marker readers are in use only while a task starts a partition: few at a time. */
    private static final int KEPT_MARKER_CLIENTS = 16;

    static final KafkaSinkClients EXECUTOR = new KafkaSinkClients();

    private final HeldProducers held = new HeldProducers(IDLE_LIMIT, HELD_PRODUCERS);
    private final KeptClients<MarkerClients> markerClients =
            new KeptClients<>(IDLE_LIMIT, KEPT_MARKER_CLIENTS, MarkerClients::close);

    private KafkaSinkClients() {
        Runtime.getRuntime()
                .addShutdownHook(
                        new Thread(
                                () -> {
                                    held.closeAll();
                                    markerClients.closeAll();
                                },
                                "onceflow-kafka-clients-shutdown"));
    }

    @Override
    public TransactionalProducer newProducer(SinkTarget target, int partition) {
        String id = target.transactionalId(partition);
        return new TransactionalProducer(
                new KafkaProducer<>(
                        KafkaClientSettings.producer(target, id),
                        new ByteArraySerializer(),
                        new ByteArraySerializer()),
                id,
                target.transactionTimeoutMs(),
                TransactionalProducer.Deadlines.DEFAULT);
    }

    @Override
    public Optional<SinkMarker> committedMarker(SinkTarget target, int partition) {
        String key = KafkaClientSettings.digest(KafkaClientSettings.markerConsumer(target));
        MarkerClients clients = markerClients.take(key).orElseGet(() -> MarkerClients.open(target));
        Optional<SinkMarker> marker;
        try {
            marker = clients.reader().lastMarker(target, partition);
        } catch (RuntimeException | Error e) {
            clients.close(); // its consumer may be mid-fetch of a window nobody reads
            throw e;
        }
        markerClients.keep(key, clients);
        return marker;
    }

    @Override
    public HeldProducers heldProducers() {
        return held;
    }
}
