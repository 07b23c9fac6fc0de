package io.onceflow.bench;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * Onceflow's `sequence` connector for a Connect worker, so both run the same work:
 * streams s0..s(N-1) split round-robin over the tasks, each counting 1..limit. It
 * declares exactly-once support, so a worker with exactly.once.source.support=enabled
 * writes its records and offsets in one transaction per poll.
 */
public class CountingSourceConnector extends SourceConnector {
    static final ConfigDef CONFIG = new ConfigDef()
            .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "Output topic")
            .define("streams", ConfigDef.Type.INT, 1, ConfigDef.Importance.HIGH, "Streams")
            .define("limit", ConfigDef.Type.LONG, Long.MAX_VALUE, ConfigDef.Importance.HIGH,
                    "Last number of every stream")
            .define("batch.size", ConfigDef.Type.INT, 100, ConfigDef.Importance.HIGH,
                    "Records per poll")
            .define("pad.bytes", ConfigDef.Type.INT, 0, ConfigDef.Importance.LOW,
                    "Padding per record");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return CountingSourceTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        int streams = Integer.parseInt(props.getOrDefault("streams", "1"));
        int tasks = Math.min(maxTasks, streams);
        List<Map<String, String>> configs = new ArrayList<>();
        for (int task = 0; task < tasks; task++) {
            StringJoiner assigned = new StringJoiner(",");
            for (int stream = task; stream < streams; stream += tasks) {
                assigned.add("s" + stream);
            }
            Map<String, String> config = new HashMap<>(props);
            config.put("assigned", assigned.toString());
            configs.add(config);
        }
        return configs;
    }

    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> props) {
        return ExactlyOnceSupport.SUPPORTED;
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public String version() {
        return "1";
    }
}
