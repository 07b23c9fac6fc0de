package io.onceflow.spark.kafka;

import java.util.Map;

/** Targets for tests: one sink of four output partitions whose markers share two partitions. */
final class TestTargets {

    private TestTargets() {}

    static SinkTarget batch(long batch) {
        return new SinkTarget(
                Map.of("bootstrap.servers", "broker:9092"),
                "out",
                4,
                "onceflow-orders-sink-markers",
                2,
                "onceflow/sink/orders/",
                "q1",
                batch,
                60000,
                null);
    }

    static SinkTarget withDrill(SinkTarget target, String flag) {
        return new SinkTarget(
                target.clientSettings(),
                target.topic(),
                target.partitions(),
                target.markerTopic(),
                target.markerPartitions(),
                target.transactionalIdStem(),
                target.query(),
                target.batch(),
                target.transactionTimeoutMs(),
                flag);
    }
}
