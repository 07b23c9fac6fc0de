package io.onceflow.spark.kafka;

/**
 * A record under a partition's marker key whose value is no marker any Onceflow writer wrote. The
 * write fails rather than guess: a wrong guess either loses or duplicates a batch.
 */
final class MarkerFormatException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    MarkerFormatException(String reason, String value, Throwable cause) {
        super("not a sink marker (" + reason + "): " + abbreviated(value), cause);
    }

    private static String abbreviated(String value) {
        return value.length() <= 200 ? value : value.substring(0, 200) + "...";
    }
}
