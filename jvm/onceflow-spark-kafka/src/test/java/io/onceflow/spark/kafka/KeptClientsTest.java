package io.onceflow.spark.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** Clients kept between tasks: taken by one task at a time, closed when idle or too many. */
class KeptClientsTest {

    private final List<String> closed = new ArrayList<>();
    private long now;
    private final KeptClients<String> kept =
            new KeptClients<>(Duration.ofNanos(100), 3, closed::add, () -> now);

    @Test
    void takingRemovesTheNewestOfItsKey() {
        kept.keep("a", "a1");
        kept.keep("b", "b1");
        kept.keep("a", "a2");
        assertEquals(Optional.of("a2"), kept.take("a"));
        assertEquals(Optional.of("a1"), kept.take("a"));
        assertEquals(Optional.empty(), kept.take("a"));
    }

    @Test
    void aClientKeptPastTheIdleLimitIsClosed() {
        kept.keep("a", "a1");
        now = 101;
        assertEquals(Optional.empty(), kept.take("a"));
        assertEquals(List.of("a1"), closed);
    }

    @Test
    void theOldestClientsBeyondTheCapacityAreClosed() {
        for (String client : List.of("a", "b", "c", "d")) {
            kept.keep(client, client);
        }
        assertEquals(List.of("a"), closed);
        kept.closeAll();
        assertEquals(List.of("a", "b", "c", "d"), closed);
    }
}
