package io.onceflow.spark.kafka;

/**
 * Every way a partition's transaction can fail, by what the caller must do next; the messages say
 * the same as the Python writer's. None of them leaves anything of the transaction visible, except
 * {@link Uncertain}, whose outcome nobody knows: writing the batch again under a fresh producer
 * (which fences this one) is the way out of each.
 */
abstract class TransactionFailure extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private TransactionFailure(String message, Throwable cause) {
        super(message, cause);
    }

    /** A newer producer initialised the same transactional id: this one is a zombie. */
    static final class Fenced extends TransactionFailure {
        private static final long serialVersionUID = 1L;

        Fenced(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /**
     * The broker aborted the transaction because it stayed open past its timeout. Reported as such,
     * not as fencing: the coordinator bumps the epoch when it aborts, so the client sees "fenced"
     * although no other producer took over, and fencing back would loop.
     */
    static final class Expired extends TransactionFailure {
        private static final long serialVersionUID = 1L;

        Expired(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** The producer cannot go on (authorization, an unsupported broker, a lost answer). */
    static final class Failed extends TransactionFailure {
        private static final long serialVersionUID = 1L;

        Failed(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** A record or the commit failed definitively; the transaction was aborted. */
    static final class Aborted extends TransactionFailure {
        private static final long serialVersionUID = 1L;

        Aborted(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /**
     * The commit kept timing out: it may or may not have happened (KAFKA-17754), so the producer
     * was abandoned without an abort, which could race the commit.
     */
    static final class Uncertain extends TransactionFailure {
        private static final long serialVersionUID = 1L;

        Uncertain(String message, Throwable cause) {
            super(message, cause);
        }
    }
}
