package io.onceflow.spark.kafka;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Clients an executor keeps from one task to the next, so a partition written again here skips a
 * client's setup (connections, an initialisation, a marker read). Taking removes: a client is used
 * by one task at a time, as Kafka's producers and consumers require. A client kept too long, or
 * beyond the capacity, is closed: a partition not written here for a while has most likely moved to
 * another executor, whose producer fenced this one anyway.
 */
final class KeptClients<T> {

    private record Kept<T>(String key, T client, long keptAtNanos) {}

    private final long idleLimitNanos;
    private final int capacity;
    private final Consumer<T> closer;
    private final LongSupplier nanoTime;

    /** Oldest first. */
    private final ArrayDeque<Kept<T>> kept = new ArrayDeque<>();

    KeptClients(Duration idleLimit, int capacity, Consumer<T> closer) {
        this(idleLimit, capacity, closer, System::nanoTime);
    }

    KeptClients(Duration idleLimit, int capacity, Consumer<T> closer, LongSupplier nanoTime) {
        this.idleLimitNanos = idleLimit.toNanos();
        this.capacity = capacity;
        this.closer = closer;
        this.nanoTime = nanoTime;
    }

    /** The newest client kept under {@code key}, now the caller's. */
    Optional<T> take(String key) {
        List<T> dropped = new ArrayList<>();
        Optional<T> taken = Optional.empty();
        synchronized (this) {
            dropStale(dropped);
            for (Iterator<Kept<T>> newest = kept.descendingIterator(); newest.hasNext(); ) {
                Kept<T> candidate = newest.next();
                if (candidate.key().equals(key)) {
                    newest.remove();
                    taken = Optional.of(candidate.client());
                    break;
                }
            }
        }
        dropped.forEach(closer);
        return taken;
    }

    /** Hands a client in a reusable state back for a later task. */
    void keep(String key, T client) {
        List<T> dropped = new ArrayList<>();
        synchronized (this) {
            kept.addLast(new Kept<>(key, client, nanoTime.getAsLong()));
            dropStale(dropped);
        }
        dropped.forEach(closer);
    }

    void closeAll() {
        List<T> all = new ArrayList<>();
        synchronized (this) {
            kept.forEach(entry -> all.add(entry.client()));
            kept.clear();
        }
        all.forEach(closer);
    }

    /** Collects, for closing outside the lock, clients kept too long or too many. */
    private void dropStale(List<T> dropped) {
        long now = nanoTime.getAsLong();
        while (!kept.isEmpty()
                && (kept.size() > capacity
                        || now - kept.peekFirst().keptAtNanos() > idleLimitNanos)) {
            dropped.add(kept.removeFirst().client());
        }
    }
}
