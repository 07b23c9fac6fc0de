package io.onceflow.spark.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** Finding a partition's last marker in windows from the end of its marker partition. */
class MarkerReaderTest {

    private static final SinkTarget TARGET = TestTargets.batch(9);

    /** Output partitions 0 and 2 share marker partition 0. */
    private static final TopicPartition MARKERS = new TopicPartition(TARGET.markerTopic(), 0);

    /**
     * A marker partition's log: a seek hands the consumer every record from there on, as a fetch
     * would (MockConsumer forgets records once polled).
     */
    private static final class Log extends MockConsumer<byte[], byte[]> {
        final List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        final List<Long> seeks = new ArrayList<>();

        Log() {
            super(OffsetResetStrategy.EARLIEST);
        }

        void append(String key, String value) {
            records.add(
                    new ConsumerRecord<>(
                            MARKERS.topic(),
                            MARKERS.partition(),
                            records.size(),
                            key.getBytes(StandardCharsets.UTF_8),
                            value == null ? null : value.getBytes(StandardCharsets.UTF_8)));
        }

        void appendMarker(int partition, long batch) {
            append(TARGET.transactionalId(partition), marker(batch));
        }

        @Override
        public synchronized void seek(TopicPartition partition, long offset) {
            super.seek(partition, offset);
            seeks.add(offset);
            records.stream().filter(r -> r.offset() >= offset).forEach(this::addRecord);
        }
    }

    private static String marker(long batch) {
        return new String(
                MarkerCodec.encode(new SinkMarker("q1", batch, TARGET.layout())),
                StandardCharsets.UTF_8);
    }

    private static Optional<SinkMarker> lastMarker(Log log, int partition, long end) {
        return new MarkerReader(where -> end, log, Duration.ofSeconds(5))
                .lastMarker(TARGET, partition);
    }

    private static Optional<SinkMarker> lastMarker(Log log, int partition) {
        return lastMarker(log, partition, log.records.size());
    }

    @Test
    void thePartitionsLastMarkerWinsOverItsNeighbours() {
        Log log = new Log();
        log.appendMarker(0, 1);
        log.appendMarker(2, 1);
        log.appendMarker(0, 2);
        log.appendMarker(2, 2);
        assertEquals(Optional.of(new SinkMarker("q1", 2, TARGET.layout())), lastMarker(log, 0));
        assertEquals(List.of(0L), log.seeks);
    }

    @Test
    void aMarkerBehindManyNeighboursIsFoundInAWiderWindow() {
        Log log = new Log();
        log.appendMarker(0, 7);
        for (int i = 0; i < 100; i++) {
            log.appendMarker(2, i);
        }
        assertEquals(7, lastMarker(log, 0).orElseThrow().batch());
        assertEquals(List.of(101L - 64, 0L), log.seeks, "64 back, then 256 more");
    }

    @Test
    void aTombstoneMeansNoMarker() {
        Log log = new Log();
        log.appendMarker(0, 7);
        log.append(TARGET.transactionalId(0), null);
        assertEquals(Optional.empty(), lastMarker(log, 0));
    }

    @Test
    void aMarkerUnderTheLegacyKeyCounts() {
        Log log = new Log();
        log.append("0", "7");
        assertEquals(Optional.of(new SinkMarker(null, 7, null)), lastMarker(log, 0));
    }

    @Test
    void anotherJobsMarkersNeverMatch() {
        Log log = new Log();
        log.append("onceflow/sink/orders-v2/0", marker(7));
        log.append("onceflow/sink/orders/00", marker(7));
        assertEquals(Optional.empty(), lastMarker(log, 0));
    }

    @Test
    void anEmptyMarkerPartitionIsNotRead() {
        Log log = new Log();
        assertEquals(Optional.empty(), lastMarker(log, 0));
        assertTrue(log.seeks.isEmpty());
    }

    @Test
    void aMarkerThatIsNoMarkerFailsTheRead() {
        Log log = new Log();
        log.append(TARGET.transactionalId(0), "{\"batch\": 7}");
        log.appendMarker(0, 8);
        assertThrows(MarkerFormatException.class, () -> lastMarker(log, 0));
    }

    @Test
    void aWindowHeldByAnOpenTransactionTimesOutNamingItsPartition() {
        Log log = new Log();
        log.appendMarker(0, 7); // the end counts two records of a transaction still open
        MarkerReader reader = new MarkerReader(where -> 3, log, Duration.ofMillis(50));
        MarkerReader.HeldBackException failure =
                assertThrows(
                        MarkerReader.HeldBackException.class, () -> reader.lastMarker(TARGET, 0));
        assertTrue(failure.getMessage().contains("partitions [0] are held by an open transaction"));
    }
}
