package io.onceflow.spark.kafka;

import java.util.Optional;

/**
 * What a partition write needs from Kafka: the executor's real clients ({@link
 * KafkaSinkClients#EXECUTOR}), or mock ones in tests of the write protocol.
 */
interface SinkClients {

    /** A new, uninitialised producer for the partition's transactional id. */
    TransactionalProducer newProducer(SinkTarget target, int partition);

    /** The partition's last committed marker, read back from the marker topic. */
    Optional<SinkMarker> committedMarker(SinkTarget target, int partition);

    HeldProducers heldProducers();
}
