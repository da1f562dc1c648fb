// KafkaProbe: the small Java helper of deploy/kafka/kafka.sh, compiled into the cache folder by
// `kafka.sh fetch` and run on the same class path as the broker (kafka-clients is on it).
//
//   KafkaProbe ports N                       print N free loopback TCP ports, one a line
//   KafkaProbe ready BOOTSTRAP SECONDS [PID] wait until the broker answers the Kafka protocol
//                                            (DescribeCluster lists a broker and a controller);
//                                            give up early when process PID has exited
//   KafkaProbe smoke BOOTSTRAP               create a topic, produce, consume in a group, check
//                                            every record came back, delete the topic
//
// Everything but the ports goes to stderr. Exit status 0 means success.

import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KafkaProbe {
    private KafkaProbe() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        switch (args[0]) {
            case "ports" -> ports(Integer.parseInt(args[1]));
            case "ready" -> {
                if (args.length < 3) {
                    usage();
                }
                long pid = args.length > 3 ? Long.parseLong(args[3]) : -1;
                System.exit(ready(args[1], Integer.parseInt(args[2]), pid) ? 0 : 1);
            }
            case "smoke" -> smoke(args[1]);
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: KafkaProbe ports N | ready BOOTSTRAP SECONDS [PID] | smoke BOOTSTRAP");
        System.exit(2);
    }

    /** Binds n ephemeral loopback ports at once (so they differ), then releases them. */
    private static void ports(int n) throws Exception {
        List<ServerSocket> sockets = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                ServerSocket s = new ServerSocket();
                s.setReuseAddress(true);
                s.bind(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
                sockets.add(s);
            }
            for (ServerSocket s : sockets) {
                System.out.println(s.getLocalPort());
            }
        } finally {
            for (ServerSocket s : sockets) {
                s.close();
            }
        }
    }

    private static Properties adminProps(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 3000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 4000);
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, 100);
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 500);
        return p;
    }

    private static boolean ready(String bootstrap, int seconds, long pid) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        String last = "no answer yet";
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            while (System.nanoTime() < deadline) {
                if (pid > 0 && ProcessHandle.of(pid).map(h -> !h.isAlive()).orElse(true)) {
                    System.err.println("kafka-probe: the broker process " + pid + " exited");
                    return false;
                }
                try {
                    DescribeClusterResult r = admin.describeCluster();
                    java.util.Collection<Node> nodes = r.nodes().get(4, TimeUnit.SECONDS);
                    Node controller = r.controller().get(4, TimeUnit.SECONDS);
                    String clusterId = r.clusterId().get(4, TimeUnit.SECONDS);
                    if (!nodes.isEmpty() && controller != null && !controller.isEmpty()) {
                        System.err.println("kafka-probe: " + bootstrap + " answers: cluster " + clusterId
                                + ", brokers " + nodes.size());
                        return true;
                    }
                    last = "no broker registered yet";
                } catch (Exception e) {
                    last = e.getCause() != null ? e.getCause().toString() : e.toString();
                }
                Thread.sleep(250);
            }
        }
        System.err.println("kafka-probe: " + bootstrap + " did not answer within " + seconds + "s: " + last);
        return false;
    }

    private static void smoke(String bootstrap) throws Exception {
        String topic = "kafka-probe-smoke-" + UUID.randomUUID();
        int partitions = 3;
        int records = 100;
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
            System.err.println("kafka-probe: created topic " + topic + " with " + partitions + " partitions");

            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.ACKS_CONFIG, "all");
            pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
            try (KafkaProducer<String, String> producer =
                    new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < records; i++) {
                    producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)).get(30, TimeUnit.SECONDS);
                }
            }
            System.err.println("kafka-probe: produced " + records + " records");

            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-group");
            cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            Set<String> seen = new HashSet<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            try (KafkaConsumer<String, String> consumer =
                    new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
                consumer.subscribe(List.of(topic));
                while (seen.size() < records && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> rec : consumer.poll(Duration.ofMillis(500))) {
                        if (!rec.value().equals("value-" + rec.key().substring("key-".length()))) {
                            throw new IllegalStateException("record " + rec.key() + " came back as " + rec.value());
                        }
                        seen.add(rec.key());
                    }
                }
                consumer.commitSync(Duration.ofSeconds(30));
            }
            if (seen.size() != records) {
                throw new IllegalStateException("consumed " + seen.size() + " of " + records + " records");
            }
            System.err.println("kafka-probe: consumed all " + records + " records in group " + topic + "-group");

            Map<?, ?> offsets = admin.listConsumerGroupOffsets(topic + "-group")
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            System.err.println("kafka-probe: committed offsets for " + offsets.size() + " partitions");
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            System.err.println("kafka-probe: deleted topic " + topic + "; smoke test passed");
        }
    }
}
