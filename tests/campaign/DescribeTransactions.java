// What the transaction coordinators say of transactional ids, asked with Kafka's own
// Admin client (librdkafka has no DescribeTransactions). It serves the campaign for its
// whole run: each line read is a space-separated list of ids, answered by one line per
// id (id, state, when its current transaction began or -1) and then a line ".". A
// failed question is answered "!" and the error. The campaign aims its faults with it:
// a task counts as struck inside a transaction only if its id's transaction was
// Ongoing, begun after the task's process started.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionDescription;

public class DescribeTransactions {
  public static void main(String[] args) throws Exception {
    Properties settings = new Properties();
    settings.put("bootstrap.servers", args[0]);
    settings.put("request.timeout.ms", "10000");
    settings.put("default.api.timeout.ms", "20000");
    BufferedReader questions =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (Admin admin = Admin.create(settings)) {
      String line;
      while ((line = questions.readLine()) != null) {
        try {
          Map<String, TransactionDescription> found =
              admin
                  .describeTransactions(Arrays.asList(line.trim().split(" ")))
                  .all()
                  .get(30, TimeUnit.SECONDS);
          for (Map.Entry<String, TransactionDescription> entry : found.entrySet()) {
            TransactionDescription description = entry.getValue();
            System.out.println(
                entry.getKey()
                    + "\t"
                    + description.state()
                    + "\t"
                    + description.transactionStartTimeMs().orElse(-1));
          }
        } catch (Exception error) {
          System.out.println("!\t" + error);
        }
        System.out.println(".");
        System.out.flush();
      }
    }
  }
}
