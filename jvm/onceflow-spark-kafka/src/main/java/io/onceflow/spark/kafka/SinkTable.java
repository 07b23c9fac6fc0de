package io.onceflow.spark.kafka;

import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructField;

import java.util.EnumSet;
import java.util.Set;

/**
 * The sink as Spark sees it: written in batches, never read. It accepts any schema so that Spark
 * hands the rows over as they are and {@link SinkWriteBuilder} says precisely what is wrong with
 * them, instead of Spark's generic mismatch error.
 */
final class SinkTable implements SupportsWrite {

    @Override
    public String name() {
        return ExactlyOnceKafkaProvider.SHORT_NAME;
    }

    @Override
    public Column[] columns() {
        StructField[] fields = RecordColumns.SCHEMA.fields();
        Column[] columns = new Column[fields.length];
        for (int i = 0; i < fields.length; i++) {
            columns[i] =
                    Column.create(fields[i].name(), fields[i].dataType(), fields[i].nullable());
        }
        return columns;
    }

    @Override
    public Set<TableCapability> capabilities() {
        return EnumSet.of(TableCapability.BATCH_WRITE, TableCapability.ACCEPT_ANY_SCHEMA);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        return new SinkWriteBuilder(info);
    }
}
