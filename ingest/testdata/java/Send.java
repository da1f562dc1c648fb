// Send runs Segment's analytics-java, unmodified, against Tributary's ingest (see
// ingest/javaclient_test.go): one message of each call type, then a flush. It exits 0 only when
// the library reported every message sent, 1 when it reported a failure or gave up waiting.
import com.segment.analytics.Analytics;
import com.segment.analytics.Callback;
import com.segment.analytics.messages.AliasMessage;
import com.segment.analytics.messages.GroupMessage;
import com.segment.analytics.messages.IdentifyMessage;
import com.segment.analytics.messages.Message;
import com.segment.analytics.messages.PageMessage;
import com.segment.analytics.messages.ScreenMessage;
import com.segment.analytics.messages.TrackMessage;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

public class Send {
  public static void main(String[] args) throws Exception {
    int messages = 6;
    CountDownLatch done = new CountDownLatch(messages);
    AtomicInteger failed = new AtomicInteger();
    Analytics analytics =
        Analytics.builder(System.getenv("WRITE_KEY"))
            .endpoint(System.getenv("INGEST_URL"))
            .flushQueueSize(messages)
            .retries(1)
            .callback(
                new Callback() {
                  @Override
                  public void success(Message m) {
                    done.countDown();
                  }

                  @Override
                  public void failure(Message m, Throwable t) {
                    System.err.println("failure: " + m.userId() + ": " + t);
                    failed.incrementAndGet();
                    done.countDown();
                  }
                })
            .build();
    analytics.enqueue(
        IdentifyMessage.builder().userId("java-1").traits(Map.of("email", "ada@example.com")));
    analytics.enqueue(
        TrackMessage.builder("Order Completed").userId("java-2").properties(Map.of("revenue", 27.5)));
    analytics.enqueue(PageMessage.builder("Pricing").userId("java-3"));
    analytics.enqueue(ScreenMessage.builder("Home").userId("java-4"));
    analytics.enqueue(GroupMessage.builder("g-1").userId("java-5"));
    analytics.enqueue(AliasMessage.builder("java-anon").userId("java-6"));
    analytics.flush();
    boolean finished = done.await(30, TimeUnit.SECONDS);
    analytics.shutdown();
    if (!finished || failed.get() > 0) {
      System.err.println("sent " + (messages - done.getCount() - failed.get()) + " of " + messages);
      System.exit(1);
    }
    System.out.println("sent " + messages);
  }
}
