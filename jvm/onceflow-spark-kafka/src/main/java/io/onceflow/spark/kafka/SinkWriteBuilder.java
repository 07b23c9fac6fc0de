package io.onceflow.spark.kafka;

import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;

/**
 * Checks the rows' columns and the options when Spark plans the write, on the driver: a mistake
 * fails the batch before any task or transaction starts.
 */
record SinkWriteBuilder(LogicalWriteInfo info) implements WriteBuilder {

    @Override
    public Write build() {
        return new SinkWrite(SinkTarget.parse(info.options()), RecordColumns.of(info.schema()));
    }
}
