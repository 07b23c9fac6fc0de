package io.onceflow.spark.kafka;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;

/**
 * Travels to the executors with the batch's target; there, every task writes through the executor's
 * shared clients. Spark's partition and task ids are not used: the output partition of a row is its
 * {@code partition} column, and the transactional id is per output partition, not per task.
 */
record SinkWriterFactory(SinkTarget target, RecordColumns columns) implements DataWriterFactory {

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
        return new SinkDataWriter(target, columns, KafkaSinkClients.EXECUTOR);
    }
}
