package io.onceflow.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * Emits the next batch.size numbers round-robin over its streams: the records
 * Onceflow's sequence task emits, byte for byte ({"stream":"s0","seq":1,"pad":"xx"},
 * keyed by the stream), with the same source partitions and offsets.
 */
public class CountingSourceTask extends SourceTask {
    private String topic;
    private List<String> streams;
    private final Map<String, Long> next = new HashMap<>();
    private long limit;
    private int batchSize;
    private String pad;

    @Override
    public void start(Map<String, String> props) {
        topic = props.get("topic");
        limit = Long.parseLong(props.getOrDefault("limit", String.valueOf(Long.MAX_VALUE)));
        batchSize = Integer.parseInt(props.getOrDefault("batch.size", "100"));
        pad = "x".repeat(Integer.parseInt(props.getOrDefault("pad.bytes", "0")));
        streams = Arrays.asList(props.get("assigned").split(","));
        List<Map<String, String>> partitions = new ArrayList<>();
        for (String stream : streams) {
            partitions.add(Map.of("stream", stream));
        }
        Map<Map<String, String>, Map<String, Object>> stored =
                context.offsetStorageReader().offsets(partitions);
        for (String stream : streams) {
            Map<String, Object> offset = stored.get(Map.of("stream", stream));
            long last = offset == null ? 0 : ((Number) offset.get("seq")).longValue();
            next.put(stream, last + 1);
        }
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        List<SourceRecord> records = new ArrayList<>(batchSize);
        while (records.size() < batchSize) {
            List<String> live = new ArrayList<>();
            for (String stream : streams) {
                if (next.get(stream) <= limit) {
                    live.add(stream);
                }
            }
            if (live.isEmpty()) {
                break;
            }
            for (String stream : live) {
                if (records.size() >= batchSize) {
                    break;
                }
                long seq = next.get(stream);
                records.add(record(stream, seq));
                next.put(stream, seq + 1);
            }
        }
        if (records.isEmpty()) {
            Thread.sleep(50);
            return null;
        }
        return records;
    }

    private SourceRecord record(String stream, long seq) {
        String body = "{\"stream\":\"" + stream + "\",\"seq\":" + seq
                + (pad.isEmpty() ? "" : ",\"pad\":\"" + pad + "\"") + "}";
        return new SourceRecord(Map.of("stream", stream), Map.of("seq", seq), topic, null,
                Schema.STRING_SCHEMA, stream, Schema.STRING_SCHEMA, body);
    }

    @Override
    public void stop() {}

    @Override
    public String version() {
        return "1";
    }
}
