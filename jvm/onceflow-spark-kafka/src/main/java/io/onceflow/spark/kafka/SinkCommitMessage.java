package io.onceflow.spark.kafka;

import org.apache.spark.sql.connector.write.WriterCommitMessage;

import java.util.Collections;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * What a task committed, for the driver's log: rows written per output partition, and the
 * partitions skipped because this batch was there already (a replay).
 */
record SinkCommitMessage(SortedMap<Integer, Long> written, SortedSet<Integer> skipped)
        implements WriterCommitMessage {

    SinkCommitMessage {
        written = Collections.unmodifiableSortedMap(new TreeMap<>(written));
        skipped = Collections.unmodifiableSortedSet(new TreeSet<>(skipped));
    }

    /** All tasks' messages as one; a failed task's is null. */
    static SinkCommitMessage combined(WriterCommitMessage[] messages) {
        SortedMap<Integer, Long> written = new TreeMap<>();
        SortedSet<Integer> skipped = new TreeSet<>();
        for (WriterCommitMessage message : messages) {
            if (message instanceof SinkCommitMessage task) {
                written.putAll(task.written());
                skipped.addAll(task.skipped());
            }
        }
        return new SinkCommitMessage(written, skipped);
    }
}
