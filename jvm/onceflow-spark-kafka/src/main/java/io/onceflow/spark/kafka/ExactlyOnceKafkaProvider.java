package io.onceflow.spark.kafka;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.Map;

/**
 * Onceflow's exactly-once Kafka writer as a Spark data source, {@code format("onceflow-kafka")}:
 * the executor half of the exactly-once Kafka sink (operator/onceflow/spark/kafka_sink.py), which
 * writes each batch the Python driver has shuffled to its output partitions, with the Python
 * writer's transactional ids, markers and replay rules. Spark finds it by its short name through
 * META-INF/services.
 */
public final class ExactlyOnceKafkaProvider implements TableProvider, DataSourceRegister {

    static final String SHORT_NAME = "onceflow-kafka";

    @Override
    public String shortName() {
        return SHORT_NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return RecordColumns.SCHEMA;
    }

    @Override
    public Table getTable(
            StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new SinkTable();
    }
}
