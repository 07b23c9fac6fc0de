package io.onceflow.spark.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/** The partition-write protocol (design §1.6), step by step, against mock clients. */
class PartitionWriteTest {

    private final MockSinkClients clients = new MockSinkClients();

    private static void sendRows(PartitionWrite write, int rows) {
        for (int i = 0; i < rows; i++) {
            write.send(("k" + i).getBytes(), ("v" + i).getBytes(), null);
        }
    }

    /** Batch {@code batch} to partition 1: its rows, committed, and its producer released. */
    private long writeBatch(long batch, int rows) {
        PartitionWrite write = PartitionWrite.open(TestTargets.batch(batch), 1, clients);
        try {
            sendRows(write, rows);
            return write.commit();
        } finally {
            write.release();
        }
    }

    @Test
    void aNewProducerCommitsTheMarkerFirstThenTheRows() {
        assertEquals(3, writeBatch(5, 3));
        MockProducer<byte[], byte[]> mock = clients.last();
        List<ProducerRecord<byte[], byte[]>> sent = mock.history();
        ProducerRecord<byte[], byte[]> marker = sent.get(0);
        assertEquals("onceflow-orders-sink-markers", marker.topic());
        assertEquals(1, marker.partition(), "partition 1 of 4 has its markers in 1 of 2");
        assertArrayEquals("onceflow/sink/orders/1".getBytes(StandardCharsets.UTF_8), marker.key());
        assertEquals(
                "{\"query\": \"q1\", \"batch\": 5, \"layout\": {\"topic\": \"out\", \"partitions\":"
                    + " 4}}",
                new String(marker.value(), StandardCharsets.US_ASCII));
        for (ProducerRecord<byte[], byte[]> row : sent.subList(1, sent.size())) {
            assertEquals("out", row.topic());
            assertEquals(1, row.partition());
        }
        assertEquals(4, sent.size());
        assertTrue(mock.transactionCommitted());
        assertEquals(1, clients.markerReads);
    }

    @Test
    void aReplayOfACommittedBatchWritesNothing() {
        clients.committed.put(1, TestTargets.batch(5).marker());
        assertEquals(0, writeBatch(5, 3));
        assertTrue(clients.last().history().isEmpty(), "no marker, no rows");
        assertFalse(clients.last().transactionInFlight());
        assertTrue(clients.held.take(TestTargets.batch(6), 1).isPresent(), "kept: nothing is open");
    }

    @Test
    void aHeldProducerTrustsTheMarkerItCommitted() {
        writeBatch(5, 3);
        assertEquals(2, writeBatch(6, 2));
        assertEquals(1, clients.producers.size(), "the held producer wrote batch 6");
        assertEquals(1, clients.markerReads, "and read no marker");
        assertEquals(0, writeBatch(6, 2), "a replay of batch 6 is skipped on what it knows");
    }

    @Test
    void aHeldProducerTakenOverIsDroppedBeforeItWritesARow() {
        writeBatch(5, 3);
        MockProducer<byte[], byte[]> taken = clients.last();
        taken.fenceProducer(); // another executor initialised the id since
        assertEquals(2, writeBatch(6, 2));
        assertTrue(taken.closed());
        assertEquals(4, taken.history().size(), "batch 5's marker and rows only");
        assertEquals(2, clients.producers.size());
        assertEquals(2, clients.markerReads, "the new producer read the marker back");
        assertTrue(clients.last().transactionCommitted());
    }

    @Test
    void aFailedTaskLeavesItsOpenTransactionToTheNextInitialiser() {
        PartitionWrite write = PartitionWrite.open(TestTargets.batch(5), 1, clients);
        sendRows(write, 3);
        write.release();
        assertFalse(clients.last().transactionAborted());
        assertTrue(clients.last().closed());
        assertTrue(clients.held.take(TestTargets.batch(5), 1).isEmpty());
    }

    @Test
    void anAbandonedTransactionIsAbortedAndItsProducerKept() {
        PartitionWrite write = PartitionWrite.open(TestTargets.batch(5), 1, clients);
        sendRows(write, 3);
        write.abandon();
        write.release();
        assertTrue(clients.last().transactionAborted());
        assertEquals(
                Optional.empty(),
                clients.held.take(TestTargets.batch(5), 1).orElseThrow().known(),
                "it still knows no batch committed");
    }

    @Test
    void theChaosDrillFailsOneWriteAfterItsTenthRow(@TempDir Path dir) throws IOException {
        Path flag = dir.resolve("fail-once");
        SinkTarget drilled = TestTargets.withDrill(TestTargets.batch(5), flag.toString());
        PartitionWrite first = PartitionWrite.open(drilled, 2, clients);
        sendRows(first, 9);
        ChaosDrill.InjectedFailure failure =
                assertThrows(
                        ChaosDrill.InjectedFailure.class,
                        () -> first.send("k".getBytes(), null, null));
        assertEquals("chaos drill: failing partition 2 of batch 5", failure.getMessage());
        assertEquals("partition 2 batch 5\n", Files.readString(flag));
        first.release();
        PartitionWrite retry = PartitionWrite.open(drilled, 2, clients);
        sendRows(retry, 20);
        assertEquals(20, retry.commit(), "the drill fails once per flag file");
        retry.release();
    }
}
