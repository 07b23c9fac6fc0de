package io.onceflow.spark.kafka;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * The executor half of the {@code chaosFailSinkOnce} drill: a partition write fails right after its
 * 10th row, once per flag file (an exclusive create decides which task, across executors and
 * retries). The end-to-end test finds the message in the driver's log and expects Spark's task
 * retry to finish the batch exactly once. Same file text and message as the Python writer's.
 */
final class ChaosDrill {

    static final int ROWS_BEFORE_FAILURE = 10;
    static final ChaosDrill OFF = new ChaosDrill(null);

    /** Raised by the drill, never in normal operation. */
    static final class InjectedFailure extends RuntimeException {
        private static final long serialVersionUID = 1L;

        InjectedFailure(String message) {
            super(message);
        }
    }

    private final Path flag;

    private ChaosDrill(Path flag) {
        this.flag = flag;
    }

    static ChaosDrill of(SinkTarget target) {
        return target.chaosFlag().map(flag -> new ChaosDrill(Path.of(flag))).orElse(OFF);
    }

    /** Called after each row a partition write sent, with how many it has sent. */
    void afterRow(int partition, long batch, long rowsSent) {
        if (flag == null || rowsSent != ROWS_BEFORE_FAILURE) {
            return;
        }
        try (OutputStream out =
                Files.newOutputStream(
                        flag, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            out.write(
                    ("partition " + partition + " batch " + batch + "\n")
                            .getBytes(StandardCharsets.UTF_8));
        } catch (FileAlreadyExistsException e) {
            return; // another task failed already
        } catch (IOException e) {
            throw new UncheckedIOException("chaos drill: cannot create " + flag, e);
        }
        throw new InjectedFailure(
                "chaos drill: failing partition " + partition + " of batch " + batch);
    }
}
