package io.onceflow.spark.kafka;

import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Optional;

/**
 * One output partition's transaction in one task: the batch's marker first, then the rows,
 * committed once the task has sent every row it holds; skipped whole when the partition's last
 * marker says this query already committed the batch here.
 *
 * <p>A producer the executor held from an earlier batch is used as it is, trusting the marker it
 * knows; its marker is sent acknowledged, which finds out before any row whether another producer
 * initialised the id since. A new producer is initialised (fencing every earlier attempt at the
 * partition and aborting its open transaction) and reads the last marker back. The Python writer's
 * {@code PartitionWrite}, step for step.
 */
final class PartitionWrite {

    private static final Logger LOG = LoggerFactory.getLogger(PartitionWrite.class);

    private final SinkTarget target;
    private final int partition;
    private final SinkClients clients;
    private final ChaosDrill drill;
    private TransactionalProducer producer;
    private Optional<SinkMarker> known;
    private boolean skip;
    private long written;

    private PartitionWrite(SinkTarget target, int partition, SinkClients clients) {
        this.target = target;
        this.partition = partition;
        this.clients = clients;
        this.drill = ChaosDrill.of(target);
    }

    /** Ready for rows: a transaction open with the marker in it, or skipping. */
    static PartitionWrite open(SinkTarget target, int partition, SinkClients clients) {
        PartitionWrite write = new PartitionWrite(target, partition, clients);
        Optional<HeldProducers.Held> held = clients.heldProducers().take(target, partition);
        if (held.isPresent()) {
            write.continueHeld(held.get());
        } else {
            write.startNew();
        }
        return write;
    }

    private void continueHeld(HeldProducers.Held held) {
        producer = held.producer();
        known = held.known();
        if (writtenAlready()) {
            return;
        }
        try {
            producer.begin();
            producer.sendAcknowledged(markerRecord());
        } catch (TransactionFailure e) {
            // Another task initialised the id since (or the broker forgot an idle producer):
            // nothing was committed, and the new producer aborts what this one sent.
            LOG.info("a held producer lost its id ({}); initialising a new one", e.getMessage());
            producer.close();
            startNew();
        } catch (RuntimeException | Error e) {
            producer.close();
            throw e;
        }
    }

    private void startNew() {
        producer = clients.newProducer(target, partition);
        try {
            producer.initialize();
            known = clients.committedMarker(target, partition);
            if (!writtenAlready()) {
                producer.begin();
                producer.send(markerRecord());
            }
        } catch (RuntimeException | Error e) {
            producer.close();
            throw e;
        }
    }

    /** A replay of a batch this query already committed here writes nothing. */
    private boolean writtenAlready() {
        skip = ReplayRule.alreadyWritten(known, target.query(), target.batch(), target.layout());
        return skip;
    }

    private ProducerRecord<byte[], byte[]> markerRecord() {
        return new ProducerRecord<>(
                target.markerTopic(),
                target.markerPartition(partition),
                null,
                target.markerKey(partition),
                MarkerCodec.encode(target.marker()));
    }

    /** Sends one row to the partition (the client stamps its time), unless skipping. */
    void send(byte[] key, byte[] value, Iterable<Header> headers) {
        if (skip) {
            return;
        }
        producer.send(new ProducerRecord<>(target.topic(), partition, null, key, value, headers));
        written++;
        drill.afterRow(partition, target.batch(), written);
    }

    boolean skipped() {
        return skip;
    }

    /** Commits marker and rows; returns the rows written (0 when skipped). */
    long commit() {
        if (!skip) {
            producer.commit();
            known = Optional.of(target.marker());
        }
        return written;
    }

    /**
     * The task failed: a transaction no commit was attempted for is aborted, which leaves the
     * producer ready for the task's retry; any other is left to {@link #release()}.
     */
    void abandon() {
        if (producer.state() != TransactionalProducer.State.IN_TRANSACTION) {
            return;
        }
        try {
            producer.abort();
        } catch (TransactionFailure e) {
            LOG.info("abort after a failed task: {}", e.getMessage());
        }
    }

    /**
     * Keeps a producer with no transaction open for a later batch on this executor; closes one in
     * any other state, leaving its open transaction to the next initialiser of the id.
     */
    void release() {
        if (producer.state() == TransactionalProducer.State.READY) {
            clients.heldProducers()
                    .keep(target, partition, new HeldProducers.Held(producer, known));
        } else {
            producer.close();
        }
    }
}
