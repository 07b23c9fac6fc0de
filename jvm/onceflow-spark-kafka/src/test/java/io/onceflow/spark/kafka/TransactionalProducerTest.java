package io.onceflow.spark.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

import java.time.Duration;

/** The producer's state machine against Kafka's MockProducer, one failure at a time. */
class TransactionalProducerTest {

    private static final ProducerRecord<byte[], byte[]> ROW =
            new ProducerRecord<>("out", 0, null, "k".getBytes(), "v".getBytes());

    /** Times out its first initialisations and commits, as many as it is told. */
    private static final class SlowProducer extends MockProducer<byte[], byte[]> {
        private int initTimeouts;
        private int commitTimeouts;

        SlowProducer(int initTimeouts, int commitTimeouts) {
            super(true, new ByteArraySerializer(), new ByteArraySerializer());
            this.initTimeouts = initTimeouts;
            this.commitTimeouts = commitTimeouts;
        }

        @Override
        public void initTransactions() {
            if (initTimeouts-- > 0) {
                throw new TimeoutException("init timed out");
            }
            super.initTransactions();
        }

        @Override
        public void commitTransaction() {
            if (commitTimeouts-- > 0) {
                throw new TimeoutException("commit timed out");
            }
            super.commitTransaction();
        }
    }

    private static TransactionalProducer producer(
            MockProducer<byte[], byte[]> mock, long transactionTimeoutMs, Duration deadline) {
        return new TransactionalProducer(
                mock,
                "onceflow/sink/orders/0",
                transactionTimeoutMs,
                new TransactionalProducer.Deadlines(deadline, deadline, Duration.ofSeconds(5)));
    }

    private static TransactionalProducer inTransaction(MockProducer<byte[], byte[]> mock) {
        TransactionalProducer producer = producer(mock, 60000, Duration.ofSeconds(60));
        producer.initialize();
        producer.begin();
        return producer;
    }

    @Test
    void aTimedOutInitialisationIsResumed() {
        TransactionalProducer producer =
                producer(new SlowProducer(3, 0), 60000, Duration.ofSeconds(60));
        producer.initialize();
        assertEquals(TransactionalProducer.State.READY, producer.state());
    }

    @Test
    void aTimedOutCommitIsRetriedNeverAborted() {
        SlowProducer mock = new SlowProducer(0, 2);
        TransactionalProducer producer = inTransaction(mock);
        producer.send(ROW);
        producer.commit();
        assertEquals(TransactionalProducer.State.READY, producer.state());
        assertTrue(mock.transactionCommitted());
        assertFalse(mock.transactionAborted());
    }

    @Test
    void aCommitTimingOutPastItsDeadlineIsUncertainAndNeverAborted() {
        SlowProducer mock = new SlowProducer(0, Integer.MAX_VALUE);
        TransactionalProducer producer = producer(mock, 60000, Duration.ZERO);
        producer.initialize();
        producer.begin();
        producer.send(ROW);
        TransactionFailure failure =
                assertThrows(TransactionFailure.Uncertain.class, producer::commit);
        assertTrue(failure.getMessage().contains("commit outcome unknown"), failure.getMessage());
        assertEquals(TransactionalProducer.State.FAILED, producer.state());
        assertThrows(
                IllegalStateException.class, producer::abort, "no abort after a commit attempt");
        producer.close();
        assertFalse(mock.transactionAborted());
        assertTrue(mock.closed());
    }

    @Test
    void aProducerAnotherOneInitialisedSinceIsFenced() {
        MockProducer<byte[], byte[]> mock =
                new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
        TransactionalProducer producer = inTransaction(mock);
        mock.fenceProducer();
        TransactionFailure failure =
                assertThrows(TransactionFailure.Fenced.class, () -> producer.send(ROW));
        assertEquals("onceflow/sink/orders/0: fenced during send", failure.getMessage());
        assertEquals(TransactionalProducer.State.FENCED, producer.state());
    }

    @Test
    void fencingOfATransactionOpenPastItsTimeoutIsReportedAsExpiry() {
        MockProducer<byte[], byte[]> mock =
                new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
        TransactionalProducer producer = producer(mock, 0, Duration.ofSeconds(60));
        producer.initialize();
        producer.begin();
        mock.fenceProducer();
        TransactionFailure failure =
                assertThrows(TransactionFailure.Expired.class, () -> producer.send(ROW));
        assertTrue(failure.getMessage().contains("transaction.timeout.ms=0"), failure.getMessage());
        assertEquals(TransactionalProducer.State.FAILED, producer.state());
    }

    @Test
    void aRecordTheBrokerRefusedAbortsTheTransactionAtCommit() {
        MockProducer<byte[], byte[]> mock =
                new MockProducer<>(false, new ByteArraySerializer(), new ByteArraySerializer());
        TransactionalProducer producer = inTransaction(mock);
        producer.send(ROW);
        mock.errorNext(new RecordTooLargeException("the record is too large"));
        TransactionFailure failure =
                assertThrows(TransactionFailure.Aborted.class, producer::commit);
        assertTrue(failure.getMessage().contains("the record is too large"), failure.getMessage());
        assertTrue(mock.transactionAborted());
        assertFalse(mock.transactionCommitted());
        assertEquals(
                TransactionalProducer.State.READY, producer.state(), "ready for the next batch");
    }

    @Test
    void aMissingGrantSaysWhichOne() {
        MockProducer<byte[], byte[]> mock =
                new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
        mock.initTransactionException = new TransactionalIdAuthorizationException("denied");
        TransactionalProducer producer = producer(mock, 60000, Duration.ofSeconds(60));
        TransactionFailure failure =
                assertThrows(TransactionFailure.Failed.class, producer::initialize);
        assertTrue(failure.getMessage().contains("grant the principal WRITE and DESCRIBE"));
        assertEquals(TransactionalProducer.State.FAILED, producer.state());
    }

    @Test
    void closingLeavesAnOpenTransactionToTheNextInitialiser() {
        MockProducer<byte[], byte[]> mock =
                new MockProducer<>(true, new ByteArraySerializer(), new ByteArraySerializer());
        TransactionalProducer producer = inTransaction(mock);
        producer.send(ROW);
        producer.close();
        assertFalse(mock.transactionAborted());
        assertTrue(mock.closed());
    }
}
