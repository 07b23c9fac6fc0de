package io.onceflow.spark.kafka;

import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Kafka for the write protocol's tests: each new producer a {@link MockProducer}, markers
 * "committed" where a test puts them, and a pool of held producers of its own.
 */
final class MockSinkClients implements SinkClients {

    static final TransactionalProducer.Deadlines QUICK =
            new TransactionalProducer.Deadlines(
                    Duration.ZERO, Duration.ZERO, Duration.ofSeconds(5));

    final List<MockProducer<byte[], byte[]>> producers = new ArrayList<>();
    final Map<Integer, SinkMarker> committed = new HashMap<>();
    final HeldProducers held = new HeldProducers(Duration.ofMinutes(10), 16);
    int markerReads;

    @Override
    public TransactionalProducer newProducer(SinkTarget target, int partition) {
        MockProducer<byte[], byte[]> mock =
                new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
        producers.add(mock);
        return new TransactionalProducer(
                mock, target.transactionalId(partition), target.transactionTimeoutMs(), QUICK);
    }

    @Override
    public Optional<SinkMarker> committedMarker(SinkTarget target, int partition) {
        markerReads++;
        return Optional.ofNullable(committed.get(partition));
    }

    @Override
    public HeldProducers heldProducers() {
        return held;
    }

    MockProducer<byte[], byte[]> last() {
        return producers.get(producers.size() - 1);
    }
}
