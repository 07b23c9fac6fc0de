package io.onceflow.spark.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.junit.jupiter.api.Test;

import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/** A task's rows, whatever output partitions they hold, one transaction per partition. */
class SinkDataWriterTest {

    private final MockSinkClients clients = new MockSinkClients();
    private final RecordColumns columns = RecordColumns.of(RecordColumns.SCHEMA);

    private static InternalRow row(int partition) {
        return new GenericInternalRow(
                new Object[] {
                    null, "v".getBytes(), new GenericArrayData(new Object[0]), partition
                });
    }

    @Test
    void interleavedPartitionsGetATransactionEachAndSkipsAreReported() {
        clients.committed.put(2, TestTargets.batch(5).marker());
        SinkDataWriter writer = new SinkDataWriter(TestTargets.batch(5), columns, clients);
        for (int partition : new int[] {1, 3, 1, 2, 3, 1}) {
            writer.write(row(partition));
        }
        SinkCommitMessage committed = writer.commit();
        writer.close();
        assertEquals(new TreeMap<>(Map.of(1, 3L, 3, 2L)), committed.written());
        assertEquals(new TreeSet<>(Set.of(2)), committed.skipped());
        assertEquals(3, clients.producers.size());
        assertTrue(
                clients.held.take(TestTargets.batch(6), 3).isPresent(), "kept for the next batch");
    }

    @Test
    void anAbortedTaskAbortsItsTransactionsAndKeepsTheProducers() {
        SinkDataWriter writer = new SinkDataWriter(TestTargets.batch(5), columns, clients);
        writer.write(row(0));
        writer.write(row(1));
        writer.abort();
        writer.close();
        clients.producers.forEach(mock -> assertTrue(mock.transactionAborted()));
        assertTrue(clients.held.take(TestTargets.batch(5), 0).isPresent());
        assertTrue(clients.held.take(TestTargets.batch(5), 1).isPresent());
    }
}
