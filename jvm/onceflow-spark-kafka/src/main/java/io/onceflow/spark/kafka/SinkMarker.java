package io.onceflow.spark.kafka;

import java.util.Objects;

/**
 * "Query {@code query} committed batch {@code batch} to this output partition of {@code layout}",
 * written in the same transaction as the partition's rows, so it is visible exactly when they are.
 * Batch ids restart at 0 with every new checkpoint; the query id (the checkpoint's identity) keeps
 * a reset query from taking its new batches for written ones.
 *
 * @param query null for markers written before markers named their query: such a marker is the last
 *     batch of the query that ran before the upgrade, and counts only for exactly that batch
 * @param layout null for markers written before markers named their layout: the current one
 */
record SinkMarker(String query, long batch, Layout layout) {

    boolean sameQuery(String query, long batch) {
        return Objects.equals(this.query, query) || (this.query == null && this.batch == batch);
    }
}
