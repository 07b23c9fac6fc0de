package io.onceflow.spark.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.kafka.clients.producer.ProducerConfig;
import org.junit.jupiter.api.Test;

import java.util.Map;

class KafkaClientSettingsTest {

    @Test
    void aKeptProducerHoldsAtMostASmallBuffer() {
        Map<String, Object> settings =
                KafkaClientSettings.producer(TestTargets.batch(3), "onceflow/sink/orders/1");
        assertEquals(4L << 20, settings.get(ProducerConfig.BUFFER_MEMORY_CONFIG));
        assertEquals("onceflow/sink/orders/1", settings.get(ProducerConfig.TRANSACTIONAL_ID_CONFIG));
        assertEquals("broker:9092", settings.get(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG));
    }
}
