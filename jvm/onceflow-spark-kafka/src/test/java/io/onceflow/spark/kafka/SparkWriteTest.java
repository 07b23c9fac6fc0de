package io.onceflow.spark.kafka;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

/**
 * The data source inside a local Spark, as the Python driver calls it: found by its short name,
 * planned as a batch append of the shuffled rows, checked on the driver. An empty batch opens no
 * transaction, so no broker is needed.
 */
class SparkWriteTest {

    private static final Map<String, String> OPTIONS =
            Map.of(
                    "contract", "1",
                    "kafka.bootstrap.servers", "127.0.0.1:1",
                    "topic", "out",
                    "partitions", "4",
                    "markerTopic", "onceflow-orders-sink-markers",
                    "markerPartitions", "2",
                    "transactionalIdStem", "onceflow/sink/orders/",
                    "query", "q1",
                    "batch", "0",
                    "transactionTimeoutMs", "60000");

    private static SparkSession spark;

    @BeforeAll
    static void startSpark() {
        spark =
                SparkSession.builder()
                        .master("local[2]")
                        .appName("onceflow-kafka-test")
                        .config("spark.ui.enabled", "false")
                        .config("spark.sql.shuffle.partitions", "4")
                        .getOrCreate();
    }

    @AfterAll
    static void stopSpark() {
        spark.stop();
    }

    private static Dataset<Row> shuffled(String extraColumn) {
        Dataset<Row> rows =
                spark.createDataFrame(List.<Row>of(), RecordColumns.SCHEMA).repartition(4);
        return extraColumn == null ? rows : rows.withColumn(extraColumn, rows.col("partition"));
    }

    @Test
    void anEmptyBatchIsWrittenThroughTheShortName() {
        shuffled(null).write().format("onceflow-kafka").mode("append").options(OPTIONS).save();
    }

    @Test
    void rowsWithAColumnTheWriterWouldDropFailOnTheDriver() {
        Exception failure =
                assertThrows(
                        Exception.class,
                        () ->
                                shuffled("topic")
                                        .write()
                                        .format("onceflow-kafka")
                                        .mode("append")
                                        .options(OPTIONS)
                                        .save());
        assertTrue(
                String.valueOf(failure.getMessage()).contains("exactly the columns"),
                failure.toString());
    }

    @Test
    void anOptionOfAnotherContractFailsOnTheDriver() {
        Exception failure =
                assertThrows(
                        IllegalArgumentException.class,
                        () ->
                                shuffled(null)
                                        .write()
                                        .format("onceflow-kafka")
                                        .mode("append")
                                        .options(OPTIONS)
                                        .option("contract", "2")
                                        .save());
        assertTrue(failure.getMessage().contains("different builds"), failure.getMessage());
    }
}
