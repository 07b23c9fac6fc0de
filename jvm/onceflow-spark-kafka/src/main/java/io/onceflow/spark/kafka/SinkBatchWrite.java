package io.onceflow.spark.kafka;

import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's side of one batch. Each task commits its own transactions; there is nothing left to
 * commit here but a log line saying what the batch wrote and what it found written.
 */
record SinkBatchWrite(SinkTarget target, RecordColumns columns) implements BatchWrite {

    private static final Logger LOG = LoggerFactory.getLogger(SinkBatchWrite.class);

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
        return new SinkWriterFactory(target, columns);
    }

    /**
     * No: Spark's coordinator lets one attempt per task commit, but here the commit is the Kafka
     * transaction, fenced by the partition's id, and a second attempt finds the first's marker. The
     * coordinator would only add a round trip to the driver per task.
     */
    @Override
    public boolean useCommitCoordinator() {
        return false;
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
        SinkCommitMessage batch = SinkCommitMessage.combined(messages);
        LOG.info(
                "onceflow-kafka: batch {} of query {} to {}: rows written per partition {}, "
                        + "partitions skipped (written before) {}",
                target.batch(),
                target.query(),
                target.topic(),
                batch.written(),
                batch.skipped());
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
        LOG.warn(
                "onceflow-kafka: batch {} of query {} to {} failed; partitions committed before the"
                    + " failure {} keep their markers, so the batch's replay skips them",
                target.batch(),
                target.query(),
                target.topic(),
                SinkCommitMessage.combined(messages).written().keySet());
    }
}
