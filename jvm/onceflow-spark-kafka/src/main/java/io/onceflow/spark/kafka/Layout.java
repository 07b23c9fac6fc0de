package io.onceflow.spark.kafka;

import java.io.Serializable;

/**
 * The output topic and its partition count a batch is written in. A marker names it because a
 * re-partition renumbers the output: partition 2 of a 3-partition topic is not partition 2 of the
 * 2-partition topic the batch may have started in.
 */
record Layout(String topic, int partitions) implements Serializable {}
