package io.onceflow.spark.kafka;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ExecutionException;

/**
 * The two clients a task reads markers with, kept by the executor between tasks: new ones cost
 * their connections every time, more than the read itself.
 */
final class MarkerClients {

    /**
     * The admin client retries a partition whose leader is being elected on its own, within this;
     * the marker topic exists before any task runs.
     */
    private static final Duration END_OFFSET_TIMEOUT = Duration.ofSeconds(30);

    private final Admin admin;
    private final KafkaConsumer<byte[], byte[]> consumer;

    private MarkerClients(Admin admin, KafkaConsumer<byte[], byte[]> consumer) {
        this.admin = admin;
        this.consumer = consumer;
    }

    static MarkerClients open(SinkTarget target) {
        Admin admin = Admin.create(KafkaClientSettings.admin(target));
        try {
            return new MarkerClients(
                    admin,
                    new KafkaConsumer<>(
                            KafkaClientSettings.markerConsumer(target),
                            new ByteArrayDeserializer(),
                            new ByteArrayDeserializer()));
        } catch (RuntimeException e) {
            admin.close(Duration.ZERO);
            throw e;
        }
    }

    MarkerReader reader() {
        return new MarkerReader(this::endOffset, consumer, MarkerReader.READ_TIMEOUT);
    }

    void close() {
        consumer.close(Duration.ZERO);
        admin.close(Duration.ZERO);
    }

    /**
     * The partition's high watermark, asked read_uncommitted: records of open transactions count,
     * so the read that follows waits for them to end.
     */
    private long endOffset(TopicPartition partition) {
        ListOffsetsOptions options =
                new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)
                        .timeoutMs((int) END_OFFSET_TIMEOUT.toMillis());
        ListOffsetsResultInfo end;
        try {
            end =
                    admin.listOffsets(Map.of(partition, OffsetSpec.latest()), options)
                            .partitionResult(partition)
                            .get();
        } catch (ExecutionException e) {
            throw new KafkaException(
                    "the end of marker partition " + partition + ": " + e.getCause(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptException(e);
        }
        if (end.offset() < 0) {
            // Taken as an end, a missing answer would make the partition look empty.
            throw new KafkaException(
                    "no end offset for marker partition "
                            + partition
                            + " (got "
                            + end.offset()
                            + ")");
        }
        return end.offset();
    }
}
