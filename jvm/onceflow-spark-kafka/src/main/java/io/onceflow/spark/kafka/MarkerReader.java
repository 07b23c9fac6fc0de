package io.onceflow.spark.kafka;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.TopicPartition;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * Finds a partition's last committed marker. Markers of several output partitions share a marker
 * partition, so the newest one of this partition is near its end, behind at most its neighbours'
 * markers and the control records: it is looked for in windows from the end, growing fourfold, not
 * read from offset 0 every time (the head compaction has not reached yet grows with every batch).
 * Each window is read read_committed until the position reaches the window's end, which waits out a
 * transaction still open there instead of ignoring its outcome.
 */
final class MarkerReader {

    /** Enough for the markers of the partitions sharing a marker partition, and then some. */
    static final int FIRST_WINDOW = 64;

    static final int WIDENING = 4;

    /** A live producer's transaction ends within its timeout; longer means one is hanging. */
    static final Duration READ_TIMEOUT = Duration.ofSeconds(120);

    /**
     * Polls start short and double while nothing comes, up to 20 ms: a window ends in a commit
     * record, which moves the position without delivering anything, so a long poll would only wait
     * for nothing; a read waiting out an open transaction does not spin.
     */
    private static final Duration FIRST_POLL = Duration.ofMillis(1);

    private static final Duration LONGEST_POLL = Duration.ofMillis(20);

    /** Where a marker partition ends, open transactions included (read_uncommitted). */
    interface EndOffsets {
        long of(TopicPartition partition);
    }

    /** A window stayed behind an open transaction past the read timeout. */
    static final class HeldBackException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        HeldBackException(String message) {
            super(message);
        }
    }

    private final EndOffsets ends;
    private final Consumer<byte[], byte[]> consumer;
    private final Duration readTimeout;

    /**
     * @param consumer read_committed, without a group; assigned only while a window is read
     */
    MarkerReader(EndOffsets ends, Consumer<byte[], byte[]> consumer, Duration readTimeout) {
        this.ends = ends;
        this.consumer = consumer;
        this.readTimeout = readTimeout;
    }

    /** The last marker committed for output partition {@code partition}; empty if none. */
    Optional<SinkMarker> lastMarker(SinkTarget target, int partition) {
        TopicPartition where =
                new TopicPartition(target.markerTopic(), target.markerPartition(partition));
        byte[] own = target.markerKey(partition);
        byte[] legacy = target.legacyMarkerKey(partition);
        long upto = ends.of(where);
        long window = FIRST_WINDOW;
        while (upto > 0) {
            long start = Math.max(0, upto - window);
            List<byte[]> values = matchingValues(where, start, upto, own, legacy);
            if (!values.isEmpty()) {
                Optional<SinkMarker> last = Optional.empty();
                for (byte[] value : values) {
                    last = MarkerCodec.decode(value); // every match must be a marker, as in Python
                }
                return last;
            }
            upto = start;
            window *= WIDENING;
        }
        return Optional.empty();
    }

    /** The values of the records in [start, end) whose key is one of the partition's. */
    private List<byte[]> matchingValues(
            TopicPartition where, long start, long end, byte[] own, byte[] legacy) {
        long deadline = System.nanoTime() + readTimeout.toNanos();
        List<byte[]> values = new ArrayList<>();
        consumer.assign(List.of(where));
        try {
            consumer.seek(where, start);
            Duration wait = FIRST_POLL;
            while (consumer.position(where) < end) {
                if (System.nanoTime() - deadline > 0) {
                    throw new HeldBackException(
                            "reading '"
                                    + where.topic()
                                    + "' to its end took over "
                                    + readTimeout.toSeconds()
                                    + "s: partitions ["
                                    + where.partition()
                                    + "] are held by an open transaction. A live producer's"
                                    + " transaction ends within its transaction.timeout.ms; one"
                                    + " that outlives it is hanging: list it with"
                                    + " `kafka-transactions.sh --bootstrap-server <servers>"
                                    + " find-hanging --broker-id <leader>` and end it with its"
                                    + " `abort` command (brokers from Kafka 3.6 prevent most with"
                                    + " transaction.partition.verification.enable=true)");
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(wait);
                wait = records.isEmpty() ? min(wait.multipliedBy(2), LONGEST_POLL) : FIRST_POLL;
                for (ConsumerRecord<byte[], byte[]> record : records.records(where)) {
                    boolean inWindow = record.offset() >= start && record.offset() < end;
                    if (inWindow
                            && (Arrays.equals(record.key(), own)
                                    || Arrays.equals(record.key(), legacy))) {
                        values.add(record.value());
                    }
                }
            }
        } finally {
            consumer.assign(List.of()); // fetches nothing until the next read
        }
        return values;
    }

    private static Duration min(Duration a, Duration b) {
        return a.compareTo(b) <= 0 ? a : b;
    }
}
