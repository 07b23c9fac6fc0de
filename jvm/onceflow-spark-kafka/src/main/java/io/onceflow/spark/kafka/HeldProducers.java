package io.onceflow.spark.kafka;

import java.time.Duration;
import java.util.Optional;

/**
 * Transactional producers an executor keeps between batches, ready (no transaction open), each with
 * the last marker of its partition as it knows it. A new producer costs an initialisation and a
 * marker read; one that committed the partition's last batch knows that marker already, and still
 * holds its id unless another producer initialised it since, which the first record of its next
 * transaction finds out.
 */
final class HeldProducers {

    /**
     * @param known the partition's last committed marker as this producer knows it: the one it
     *     committed itself, or the one it read after initialising
     */
    record Held(TransactionalProducer producer, Optional<SinkMarker> known) {}

    private final KeptClients<Held> kept;

    HeldProducers(Duration idleLimit, int capacity) {
        this.kept = new KeptClients<>(idleLimit, capacity, held -> held.producer().close());
    }

    Optional<Held> take(SinkTarget target, int partition) {
        return kept.take(key(target, partition));
    }

    void keep(SinkTarget target, int partition, Held held) {
        kept.keep(key(target, partition), held);
    }

    void closeAll() {
        kept.closeAll();
    }

    /** The id, and the settings: a producer is reused only by a sink with the same ones. */
    private static String key(SinkTarget target, int partition) {
        String id = target.transactionalId(partition);
        return id + "#" + KafkaClientSettings.digest(KafkaClientSettings.producer(target, id));
    }
}
