// The audit's second reader: Kafka's own Java consumer, read_committed, from the
// beginning of every partition to its last stable offset as of the start. It writes one
// line per record (partition, offset, Base64 of key and of value) to the file named by its third argument,
// so that the campaign can check that librdkafka and the Java client read the same
// records. Run from source by the JDK (java ReadCommitted.java): nothing to build.
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ReadCommitted {
  private static String base64(byte[] bytes) {
    return bytes == null ? "-" : Base64.getEncoder().encodeToString(bytes);
  }

  public static void main(String[] args) throws IOException {
    Properties settings = new Properties();
    settings.put("bootstrap.servers", args[0]);
    settings.put("isolation.level", "read_committed");
    settings.put("enable.auto.commit", "false");
    settings.put("key.deserializer", ByteArrayDeserializer.class.getName());
    settings.put("value.deserializer", ByteArrayDeserializer.class.getName());
    settings.put("max.poll.records", "5000");
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(settings);
        BufferedWriter out = Files.newBufferedWriter(Path.of(args[2]), StandardCharsets.UTF_8)) {
      List<TopicPartition> partitions = new ArrayList<>();
      for (PartitionInfo info : consumer.partitionsFor(args[1], Duration.ofSeconds(60))) {
        partitions.add(new TopicPartition(args[1], info.partition()));
      }
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      // Under read_committed, endOffsets are the last stable offsets.
      Map<TopicPartition, Long> ends = consumer.endOffsets(partitions, Duration.ofSeconds(60));
      while (partitions.stream().anyMatch(p -> consumer.position(p) < ends.get(p))) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofSeconds(1))) {
          if (record.offset() >= ends.get(new TopicPartition(record.topic(), record.partition()))) {
            continue;
          }
          out.write(record.partition() + "\t" + record.offset() + "\t" + base64(record.key()));
          out.write("\t" + base64(record.value()));
          out.newLine();
        }
      }
    }
  }
}
