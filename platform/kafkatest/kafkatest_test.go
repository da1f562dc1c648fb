package kafkatest_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/tributary-cdp/tributary/platform/kafkatest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder stands in for a testing.TB to see whether a helper fails or skips.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func runRecorded(t *testing.T, fn func(tb testing.TB) []string) (*recorder, []string) {
	r := &recorder{TB: t}
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = fn(r)
	}()
	<-done
	return r, got
}

func TestApache(t *testing.T) {
	tests := []struct {
		name, brokers, require string
		want                   []string
		fatal, skip            string // fragments of the expected message
	}{
		{name: "set", brokers: "127.0.0.1:9092, 127.0.0.1:9093", want: []string{"127.0.0.1:9092", "127.0.0.1:9093"}},
		{name: "set and required", brokers: "h:1", require: "1", want: []string{"h:1"}},
		{name: "unset", skip: "SKIPPING Apache Kafka suite: APACHE_KAFKA_BROKERS is not set"},
		{name: "unset but required", require: "1", fatal: "TEST_APACHE_KAFKA=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(kafkatest.EnvApacheBrokers, tt.brokers)
			t.Setenv(kafkatest.EnvRequireApache, tt.require)
			r, got := runRecorded(t, kafkatest.Apache)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Apache = %q, want %q", got, tt.want)
			}
			if (tt.fatal == "") != (r.fatal == "") || !strings.Contains(r.fatal, tt.fatal) {
				t.Errorf("fatal = %q, want %q", r.fatal, tt.fatal)
			}
			if (tt.skip == "") != (r.skip == "") || !strings.Contains(r.skip, tt.skip) {
				t.Errorf("skip = %q, want %q", r.skip, tt.skip)
			}
		})
	}
}

func TestEmbedded(t *testing.T) {
	brokers := kafkatest.Embedded(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// The virtual broker works inside a synctest bubble: a record produced is read back, and an
// empty fetch that waits out its hour-long deadline takes no real time at all.
func TestVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		brokers, network := kafkatest.Virtual(t)
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.Dialer(network.DialContext),
			kgo.DefaultProduceTopic("t"),
			kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), 1, -1, nil, "t"); err != nil {
			t.Fatalf("creating topic: %v", err)
		}
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("producing: %v", err)
		}
		fs := cl.PollFetches(t.Context())
		if rs := fs.Records(); len(rs) != 1 || string(rs[0].Value) != "v" {
			t.Fatalf("read %v (%v), want the one record", rs, fs.Err())
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		if n := cl.PollFetches(ctx).NumRecords(); n != 0 {
			t.Fatalf("read %d more records, want none", n)
		}
		if waited := time.Since(start); waited < time.Hour {
			t.Fatalf("the empty poll returned after %v of virtual time, before its deadline", waited)
		}
	})
}

func TestConformanceRunsBoth(t *testing.T) {
	t.Setenv(kafkatest.EnvApacheBrokers, "")
	t.Setenv(kafkatest.EnvRequireApache, "")
	var ran []string
	kafkatest.Conformance(t, func(t *testing.T, brokers []string) {
		ran = append(ran, t.Name())
		if len(brokers) == 0 {
			t.Error("no brokers")
		}
	})
	// Apache Kafka is unset here, so only the embedded half runs; the other is skipped.
	if want := []string{"TestConformanceRunsBoth/embedded-kfake"}; !slices.Equal(ran, want) {
		t.Errorf("ran %q, want %q", ran, want)
	}
}

func TestUniqueTopic(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)
	a := kafkatest.UniqueTopic(t, "config")
	b := kafkatest.UniqueTopic(t, "config")
	if a == b {
		t.Errorf("two calls gave %s", a)
	}
	if !strings.HasPrefix(a, "config.TestUniqueTopic.") {
		t.Errorf("UniqueTopic = %s, want the prefix and the test name first", a)
	}
	t.Run("odd name: spaces/and ünïcode "+strings.Repeat("x", 300), func(t *testing.T) {
		if got := kafkatest.UniqueTopic(t, "p"); !valid.MatchString(got) {
			t.Errorf("UniqueTopic = %q, not a valid topic name", got)
		}
	})
}
