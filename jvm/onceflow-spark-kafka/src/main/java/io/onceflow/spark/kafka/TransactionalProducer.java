package io.onceflow.spark.kafka;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.errors.UnsupportedVersionException;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * One transactional producer as a state machine: every call checks the state it needs, and every
 * Kafka error leaves as a named {@link TransactionFailure} with the state it left the producer in.
 * Never aborts after a commit was attempted and timed out (KAFKA-17754): the commit may still
 * complete, and an abort could race it. Not thread-safe: one task uses it at a time.
 */
final class TransactionalProducer {

    enum State {
        NEW,
        READY,
        IN_TRANSACTION,
        /** A commit was attempted: only its own retry may follow, never an abort. */
        COMMITTING,
        FENCED,
        FAILED,
        CLOSED
    }

    /**
     * How long to keep at it.
     *
     * @param initialize resumed, not failed, while it times out: a task paused or cut off in
     *     mid-call must still get to learn whether it was superseded (300 s, as the Python writer)
     * @param commit a timed-out commit is retried (never aborted) for 120 s, then given up as
     *     uncertain
     * @param acknowledge the wait for a held producer's marker, the one round trip that tells
     *     whether it still holds its id
     */
    record Deadlines(Duration initialize, Duration commit, Duration acknowledge) {
        static final Deadlines DEFAULT =
                new Deadlines(
                        Duration.ofSeconds(300), Duration.ofSeconds(120), Duration.ofSeconds(30));
    }

    private final Producer<byte[], byte[]> producer;
    private final String transactionalId;
    private final long transactionTimeoutMs;
    private final Deadlines deadlines;

    /** The first record the broker refused in the open transaction: it fails the commit. */
    private final AtomicReference<Exception> refused = new AtomicReference<>();

    private final Callback onAcknowledged =
            (metadata, error) -> {
                if (error != null) {
                    refused.compareAndSet(null, error);
                }
            };
    private State state = State.NEW;
    private long beganAtNanos;

    TransactionalProducer(
            Producer<byte[], byte[]> producer,
            String transactionalId,
            long transactionTimeoutMs,
            Deadlines deadlines) {
        this.producer = producer;
        this.transactionalId = transactionalId;
        this.transactionTimeoutMs = transactionTimeoutMs;
        this.deadlines = deadlines;
    }

    State state() {
        return state;
    }

    String transactionalId() {
        return transactionalId;
    }

    /** Fences every earlier producer of this id and aborts its open transaction. */
    void initialize() {
        require(State.NEW);
        long deadline = System.nanoTime() + deadlines.initialize().toNanos();
        while (true) {
            try {
                producer.initTransactions();
                state = State.READY;
                return;
            } catch (RetriableException e) {
                if (System.nanoTime() - deadline >= 0) {
                    throw failure(e, "initTransactions");
                }
            } catch (KafkaException e) {
                throw failure(e, "initTransactions");
            }
        }
    }

    void begin() {
        require(State.READY);
        try {
            producer.beginTransaction();
        } catch (KafkaException e) {
            throw failure(e, "beginTransaction");
        }
        refused.set(null);
        beganAtNanos = System.nanoTime();
        state = State.IN_TRANSACTION;
    }

    /** Sends a record in the open transaction; a refusal surfaces at {@link #commit()}. */
    void send(ProducerRecord<byte[], byte[]> record) {
        require(State.IN_TRANSACTION);
        try {
            producer.send(record, onAcknowledged);
        } catch (KafkaException e) {
            throw failure(e, "send");
        }
    }

    /**
     * Sends a record and waits for the broker to take it. As a transaction's first record this
     * checks, in one round trip, that no producer initialised this id since this one did: adding
     * the partition to the transaction fails for a fenced producer, which surfaces here before any
     * row is sent.
     */
    void sendAcknowledged(ProducerRecord<byte[], byte[]> record) {
        require(State.IN_TRANSACTION);
        try {
            producer.send(record, onAcknowledged)
                    .get(deadlines.acknowledge().toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw failure(asKafkaException(e.getCause()), "send");
        } catch (java.util.concurrent.TimeoutException e) {
            state = State.FAILED;
            throw new TransactionFailure.Failed(
                    transactionalId
                            + ": send: no acknowledgement within "
                            + deadlines.acknowledge(),
                    e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            state = State.FAILED;
            throw new InterruptException(e);
        } catch (KafkaException e) {
            throw failure(e, "send");
        }
    }

    /**
     * Commits everything sent since {@link #begin()}. A record the broker refused fails the
     * transaction first (it is aborted, and the refusal named). A timed-out commit is retried until
     * the deadline, then reported {@link TransactionFailure.Uncertain}; it is never aborted.
     */
    void commit() {
        require(State.IN_TRANSACTION);
        try {
            producer.flush(); // bounded by delivery.timeout.ms; the callbacks have run after it
        } catch (KafkaException e) {
            throw failure(e, "flush");
        }
        Exception refusal = refused.get();
        if (refusal != null) {
            throw failure(asKafkaException(refusal), "send");
        }
        state = State.COMMITTING;
        long deadline = System.nanoTime() + deadlines.commit().toNanos();
        while (true) {
            try {
                producer.commitTransaction();
                state = State.READY;
                return;
            } catch (RetriableException e) {
                if (System.nanoTime() - deadline >= 0) {
                    state = State.FAILED;
                    throw new TransactionFailure.Uncertain(
                            transactionalId
                                    + ": commit outcome unknown after "
                                    + deadlines.commit().toSeconds()
                                    + " s; the producer is dropped without an abort, and the task's"
                                    + " retry fences it",
                            e);
                }
            } catch (InterruptException e) {
                state = State.FAILED; // the commit's outcome is unknown: no abort
                throw e;
            } catch (KafkaException e) {
                throw failure(e, "commitTransaction"); // failed definitively: aborting is safe
            }
        }
    }

    /** Discards the open transaction; only before a commit was attempted. */
    void abort() {
        require(State.IN_TRANSACTION);
        try {
            producer.abortTransaction();
            state = State.READY;
        } catch (KafkaException e) {
            throw failure(e, "abortTransaction");
        }
    }

    /**
     * Closes without waiting: an open transaction is left to the next initialiser of the id (or the
     * broker's timeout). A graceful close would abort it, which after a timed-out commit could race
     * that commit.
     */
    void close() {
        if (state == State.CLOSED) {
            return;
        }
        state = State.CLOSED;
        try {
            producer.close(Duration.ZERO);
        } catch (KafkaException e) {
            // nothing of a producer being dropped is left to save
        }
    }

    private void require(State expected) {
        if (state != expected) {
            throw new IllegalStateException(
                    transactionalId + ": the producer is " + state + ", expected " + expected);
        }
    }

    /** The error as the caller must see it, and the state the producer is left in. */
    private RuntimeException failure(KafkaException error, String what) {
        if (error instanceof InterruptException) {
            state = State.FAILED; // the task is being killed; its retry fences this producer
            return error;
        }
        boolean fenced =
                causedBy(error, ProducerFencedException.class, InvalidProducerEpochException.class);
        boolean fatal =
                causedBy(
                        error,
                        AuthorizationException.class,
                        AuthenticationException.class,
                        UnsupportedVersionException.class,
                        OutOfOrderSequenceException.class);
        boolean open = state == State.IN_TRANSACTION || state == State.COMMITTING;
        long openMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - beganAtNanos);
        if ((fenced || fatal) && open && openMs >= transactionTimeoutMs) {
            state = State.FAILED;
            return new TransactionFailure.Expired(
                    transactionalId
                            + ": the transaction stayed open "
                            + openMs
                            + " ms, longer than "
                            + "transaction.timeout.ms="
                            + transactionTimeoutMs
                            + ", and the broker aborted it; write smaller batches or raise"
                            + " spec.sink.kafka.transactionTimeoutMs ("
                            + what
                            + ": "
                            + detail(error)
                            + ")",
                    error);
        }
        if (fenced) {
            state = State.FENCED;
            return new TransactionFailure.Fenced(
                    transactionalId + ": fenced during " + what, error);
        }
        if (fatal || !open || what.equals("abortTransaction")) {
            state = State.FAILED;
            return new TransactionFailure.Failed(accessHint(error, what), error);
        }
        // The transaction failed (a record the broker refused, a definite commit error), the
        // producer perhaps not: abort, so the caller sees one named error and a producer that is
        // ready for the next transaction, or learns here that it is not.
        try {
            producer.abortTransaction();
            state = State.READY;
        } catch (KafkaException abortError) {
            error.addSuppressed(abortError);
            state =
                    causedBy(abortError, ProducerFencedException.class)
                            ? State.FENCED
                            : State.FAILED;
        }
        return new TransactionFailure.Aborted(
                transactionalId
                        + ": transaction aborted after "
                        + what
                        + " failed: "
                        + detail(error),
                error);
    }

    private String accessHint(KafkaException error, String what) {
        if (causedBy(error, TransactionalIdAuthorizationException.class)) {
            return transactionalId
                    + ": not authorized; grant the principal WRITE and DESCRIBE on "
                    + "TransactionalId resources with the pipeline's prefix (PREFIXED pattern)";
        }
        if (causedBy(error, ClusterAuthorizationException.class)) {
            return transactionalId
                    + ": not authorized; grant IDEMPOTENT_WRITE on the cluster "
                    + "(Kafka < 3.0)";
        }
        if (causedBy(error, TopicAuthorizationException.class)) {
            return transactionalId + ": not authorized; grant WRITE/READ/DESCRIBE on the topic";
        }
        return transactionalId + ": " + what + ": " + detail(error);
    }

    @SafeVarargs
    private static boolean causedBy(Throwable error, Class<? extends Throwable>... kinds) {
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            for (Class<? extends Throwable> kind : kinds) {
                if (kind.isInstance(cause)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The error and its innermost cause: the client wraps the broker's answer in its own words. */
    private static String detail(Throwable error) {
        Throwable root = error;
        while (root.getCause() != null) {
            root = root.getCause();
        }
        return root == error ? error.toString() : error + " (" + root + ")";
    }

    private static KafkaException asKafkaException(Throwable error) {
        return error instanceof KafkaException kafka ? kafka : new KafkaException(error);
    }
}
