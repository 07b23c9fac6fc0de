package io.onceflow.spark.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;

import java.util.List;

/** The rows the Python driver shuffles, read as Kafka records; anything else refused. */
class RecordColumnsTest {

    /** As with_output_partition makes it, in another column order. */
    private static final StructType SHUFFLED =
            new StructType()
                    .add("partition", DataTypes.IntegerType, false)
                    .add("key", DataTypes.BinaryType)
                    .add("value", DataTypes.BinaryType)
                    .add("headers", RecordColumns.SCHEMA.apply("headers").dataType(), false);

    private static InternalRow row(Object partition, byte[] key, Object[] headers) {
        return new GenericInternalRow(
                new Object[] {partition, key, "v".getBytes(), new GenericArrayData(headers)});
    }

    private static InternalRow header(String key, byte[] value) {
        return new GenericInternalRow(new Object[] {UTF8String.fromString(key), value});
    }

    @Test
    void aShuffledRowReadsAsItsRecord() {
        RecordColumns columns = RecordColumns.of(SHUFFLED);
        InternalRow row =
                row(
                        3,
                        "k".getBytes(),
                        new Object[] {header("h", "x".getBytes()), header("n", null)});
        assertEquals(3, columns.partition(row, 4));
        assertArrayEquals("k".getBytes(), columns.key(row));
        assertArrayEquals("v".getBytes(), columns.value(row));
        List<Header> headers = columns.headers(row);
        assertEquals("h", headers.get(0).key());
        assertArrayEquals("x".getBytes(), headers.get(0).value());
        assertNull(headers.get(1).value());
    }

    @Test
    void aRowWithoutKeyOrHeadersHasNone() {
        RecordColumns columns = RecordColumns.of(SHUFFLED);
        InternalRow row = row(0, null, new Object[0]);
        assertNull(columns.key(row));
        assertNull(columns.headers(row), "no headers: the record carries none");
    }

    @Test
    void aRowForAPartitionTheTopicLacksIsRefused() {
        RecordColumns columns = RecordColumns.of(SHUFFLED);
        assertThrows(
                IllegalArgumentException.class,
                () -> columns.partition(row(4, null, new Object[0]), 4));
    }

    @Test
    void aColumnTheWriterWouldDropIsRefused() {
        IllegalArgumentException failure =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> RecordColumns.of(SHUFFLED.add("topic", DataTypes.StringType)));
        assertTrue(failure.getMessage().contains("exactly the columns"), failure.getMessage());
    }

    @Test
    void columnsOfAnotherTypeAreRefused() {
        StructType textValue =
                new StructType()
                        .add("key", DataTypes.BinaryType)
                        .add("value", DataTypes.StringType)
                        .add("headers", RecordColumns.SCHEMA.apply("headers").dataType())
                        .add("partition", DataTypes.IntegerType);
        IllegalArgumentException failure =
                assertThrows(IllegalArgumentException.class, () -> RecordColumns.of(textValue));
        assertEquals(
                "onceflow-kafka: column value is string; the writer takes binary",
                failure.getMessage());
        StructType textHeaders =
                new StructType()
                        .add("key", DataTypes.BinaryType)
                        .add("value", DataTypes.BinaryType)
                        .add(
                                "headers",
                                DataTypes.createArrayType(
                                        new StructType()
                                                .add("key", DataTypes.StringType)
                                                .add("value", DataTypes.StringType)))
                        .add("partition", DataTypes.IntegerType);
        assertThrows(IllegalArgumentException.class, () -> RecordColumns.of(textHeaders));
    }
}
