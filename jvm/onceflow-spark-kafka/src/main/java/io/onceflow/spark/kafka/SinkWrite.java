package io.onceflow.spark.kafka;

import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.Write;

/**
 * One batch's write. Only {@link #toBatch()}: the Python driver runs the stream ({@code
 * foreachBatch}) and decides each batch's layout before the shuffle is planned.
 */
record SinkWrite(SinkTarget target, RecordColumns columns) implements Write {

    @Override
    public String description() {
        return "onceflow-kafka batch " + target.batch() + " to " + target.topic();
    }

    @Override
    public BatchWrite toBatch() {
        return new SinkBatchWrite(target, columns);
    }
}
