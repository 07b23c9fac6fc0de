package io.onceflow.spark.kafka;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;

import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * One task's rows: a transaction per output partition they belong to, opened at the partition's
 * first row and all committed when the task has sent every row. The shuffle normally gives a task
 * exactly one output partition; should it ever give several, even interleaved, each still gets one
 * transaction, so a partition is never written in two pieces (the second would find the first's
 * marker and be skipped).
 */
final class SinkDataWriter implements DataWriter<InternalRow> {

    private final SinkTarget target;
    private final RecordColumns columns;
    private final SinkClients clients;
    private final SortedMap<Integer, PartitionWrite> writes = new TreeMap<>();

    SinkDataWriter(SinkTarget target, RecordColumns columns, SinkClients clients) {
        this.target = target;
        this.columns = columns;
        this.clients = clients;
    }

    @Override
    public void write(InternalRow row) {
        int partition = columns.partition(row, target.partitions());
        PartitionWrite write = writes.get(partition);
        if (write == null) {
            write = PartitionWrite.open(target, partition, clients);
            writes.put(partition, write);
        }
        write.send(columns.key(row), columns.value(row), columns.headers(row));
    }

    @Override
    public SinkCommitMessage commit() {
        SortedMap<Integer, Long> written = new TreeMap<>();
        SortedSet<Integer> skipped = new TreeSet<>();
        writes.forEach(
                (partition, write) -> {
                    long rows = write.commit();
                    if (write.skipped()) {
                        skipped.add(partition);
                    } else {
                        written.put(partition, rows);
                    }
                });
        return new SinkCommitMessage(written, skipped);
    }

    @Override
    public void abort() {
        writes.values().forEach(PartitionWrite::abandon);
    }

    @Override
    public void close() {
        writes.values().forEach(PartitionWrite::release);
        writes.clear();
    }
}
