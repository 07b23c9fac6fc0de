package io.onceflow.spark.kafka;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

/**
 * Where a Kafka record's parts sit in the rows Spark hands the writer: the batch the Python driver
 * shuffled to its output partitions ({@code with_output_partition} in kafka_sink.py), whose {@code
 * partition} column the writer obeys and never recomputes. Checked once, on the driver, so no task
 * starts on rows it would misread.
 */
record RecordColumns(int key, int value, int headers, int partition) implements Serializable {

    static final String KEY = "key";
    static final String VALUE = "value";
    static final String HEADERS = "headers";
    static final String PARTITION = "partition";

    /** The rows the writer takes, as the table's schema. */
    static final StructType SCHEMA =
            new StructType()
                    .add(KEY, DataTypes.BinaryType)
                    .add(VALUE, DataTypes.BinaryType)
                    .add(
                            HEADERS,
                            DataTypes.createArrayType(
                                    new StructType()
                                            .add(KEY, DataTypes.StringType)
                                            .add(VALUE, DataTypes.BinaryType)))
                    .add(PARTITION, DataTypes.IntegerType);

    static RecordColumns of(StructType schema) {
        List<String> names = List.of(schema.fieldNames());
        List<String> extra = new ArrayList<>(names);
        extra.removeAll(List.of(KEY, VALUE, HEADERS, PARTITION));
        if (!extra.isEmpty() || names.size() != 4) {
            throw new IllegalArgumentException(
                    "onceflow-kafka: the rows must have exactly the columns key, value, headers and"
                        + " partition ("
                            + SCHEMA.simpleString()
                            + "), not "
                            + schema.simpleString());
        }
        check(schema, KEY, BinaryType.class);
        check(schema, VALUE, BinaryType.class);
        check(schema, PARTITION, IntegerType.class);
        if (!isHeaderArray(schema.apply(HEADERS).dataType())) {
            throw wrongType(schema.apply(HEADERS));
        }
        return new RecordColumns(
                schema.fieldIndex(KEY),
                schema.fieldIndex(VALUE),
                schema.fieldIndex(HEADERS),
                schema.fieldIndex(PARTITION));
    }

    private static void check(StructType schema, String name, Class<? extends DataType> type) {
        StructField field = schema.apply(name);
        if (!type.isInstance(field.dataType())) {
            throw wrongType(field);
        }
    }

    /** array<struct<key:string,value:binary>>, whatever the nullability. */
    private static boolean isHeaderArray(DataType type) {
        return type instanceof ArrayType array
                && array.elementType() instanceof StructType header
                && header.fields().length == 2
                && header.fields()[0].name().equals(KEY)
                && header.fields()[0].dataType() instanceof StringType
                && header.fields()[1].name().equals(VALUE)
                && header.fields()[1].dataType() instanceof BinaryType;
    }

    private static IllegalArgumentException wrongType(StructField field) {
        return new IllegalArgumentException(
                "onceflow-kafka: column "
                        + field.name()
                        + " is "
                        + field.dataType().simpleString()
                        + "; the writer takes "
                        + SCHEMA.apply(field.name()).dataType().simpleString());
    }

    /** The row's output partition, which must be one of the topic's. */
    int partition(InternalRow row, int partitions) {
        if (row.isNullAt(partition)) {
            throw new IllegalArgumentException("onceflow-kafka: a row without an output partition");
        }
        int number = row.getInt(partition);
        if (number < 0 || number >= partitions) {
            throw new IllegalArgumentException(
                    "onceflow-kafka: a row for output partition "
                            + number
                            + " of a topic with "
                            + partitions
                            + " partitions");
        }
        return number;
    }

    byte[] key(InternalRow row) {
        return row.isNullAt(key) ? null : row.getBinary(key);
    }

    byte[] value(InternalRow row) {
        return row.isNullAt(value) ? null : row.getBinary(value);
    }

    /** The row's headers; null when it has none (the record then carries none). */
    List<Header> headers(InternalRow row) {
        if (row.isNullAt(headers)) {
            return null;
        }
        ArrayData array = row.getArray(headers);
        int count = array.numElements();
        if (count == 0) {
            return null;
        }
        List<Header> found = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            InternalRow header = array.isNullAt(i) ? null : array.getStruct(i, 2);
            if (header == null || header.isNullAt(0)) {
                throw new IllegalArgumentException("onceflow-kafka: a header without a key");
            }
            found.add(
                    new RecordHeader(
                            header.getUTF8String(0).toString(),
                            header.isNullAt(1) ? null : header.getBinary(1)));
        }
        return found;
    }
}
