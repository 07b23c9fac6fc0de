package io.onceflow.spark.kafka;

import java.util.Optional;

/**
 * When a partition write may skip its batch: only when this query already committed it, or a later
 * batch, to this partition of this layout. Anything else is written: a marker of another query (a
 * reset checkpoint reuses batch ids), or of another layout (a re-partition reuses partition
 * numbers). The Python writer's {@code already_written}; both are held to the shared contract
 * fixture.
 */
final class ReplayRule {

    private ReplayRule() {}

    static boolean alreadyWritten(
            Optional<SinkMarker> marker, String query, long batch, Layout layout) {
        if (marker.isEmpty() || !marker.get().sameQuery(query, batch)) {
            return false;
        }
        Layout written = marker.get().layout();
        if (written != null && !written.equals(layout)) {
            return false;
        }
        return marker.get().batch() >= batch;
    }
}
