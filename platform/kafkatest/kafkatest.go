// Package kafkatest holds the Kafka test helpers every Tributary module uses: a fresh embedded
// broker per test (Embedded), the same broker on an in-memory network for tests inside a
// testing/synctest bubble (Virtual), the shared Apache Kafka broker that `make test` starts
// (Apache), one conformance suite run against both (Conformance), and topic names that cannot
// collide on the shared broker (UniqueTopic).
//
// Apache Kafka is reached through APACHE_KAFKA_BROKERS, which scripts/test.sh sets after
// `deploy/kafka/kafka.sh up`. When it is unset the Apache Kafka half of a conformance suite is
// skipped with a loud "SKIPPING Apache Kafka suite" message, unless TEST_APACHE_KAFKA=1, which
// makes it a failure. By hand:
//
//	APACHE_KAFKA_BROKERS=$(deploy/kafka/kafka.sh up) go test ./platform/...
//	deploy/kafka/kafka.sh down
package kafkatest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tributary-cdp/tributary/platform/embedded"
)

// Environment variables read by Apache.
const (
	// EnvApacheBrokers holds the bootstrap address of the Apache Kafka broker for tests.
	EnvApacheBrokers = "APACHE_KAFKA_BROKERS"
	// EnvRequireApache, set to 1, turns a missing Apache Kafka broker into a test failure.
	EnvRequireApache = "TEST_APACHE_KAFKA"
)

// Names of Conformance's subtests.
const (
	EmbeddedName = "embedded-kfake"
	ApacheName   = "apache-kafka"
)

// Embedded starts a fresh in-memory embedded broker (kfake) on a free loopback port, closes it
// on t.Cleanup, and returns its bootstrap addresses.
func Embedded(t testing.TB) []string {
	t.Helper()
	b, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatalf("starting embedded broker: %v", err)
	}
	t.Cleanup(b.Close)
	return b.Addrs()
}

// VirtualPort is the port Virtual's broker listens on, on its own virtual network.
const VirtualPort = 9092

// Virtual starts a fresh in-memory broker (kfake, configured as Embedded's) that listens on a
// kfake.VirtualNetwork instead of loopback TCP, closes it on t.Cleanup, and returns its
// bootstrap addresses and the network. Every client must dial through the network
// (kgo.Dialer(network.DialContext)); a connection over net.Pipe is what lets a test run
// inside a testing/synctest bubble, whose fake clock only advances while every goroutine is
// durably blocked, which a goroutine in real TCP I/O never is. Call it inside the bubble
// (synctest.Test) so that the broker's goroutines and timers belong to it; it works outside
// one too.
func Virtual(t testing.TB) ([]string, *kfake.VirtualNetwork) {
	t.Helper()
	network := new(kfake.VirtualNetwork)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(VirtualPort), kfake.ListenFn(network.Listen))
	if err != nil {
		t.Fatalf("starting virtual broker: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs(), network
}

// Apache returns the bootstrap addresses of the shared Apache Kafka broker from
// APACHE_KAFKA_BROKERS. When it is unset, the test fails if TEST_APACHE_KAFKA=1 and is skipped
// loudly otherwise. Tests on this broker share it with every other test: use UniqueTopic (and
// unique group ids) for everything they create.
func Apache(t testing.TB) []string {
	t.Helper()
	var brokers []string
	for _, b := range strings.Split(os.Getenv(EnvApacheBrokers), ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) > 0 {
		return brokers
	}
	const why = EnvApacheBrokers + " is not set (`make test` sets it when Java 17+ and Maven are present; " +
		"or run APACHE_KAFKA_BROKERS=$(deploy/kafka/kafka.sh up) go test ...)"
	if os.Getenv(EnvRequireApache) == "1" {
		t.Fatalf("Apache Kafka suite required (%s=1) but %s", EnvRequireApache, why)
	}
	t.Skipf("SKIPPING Apache Kafka suite: %s", why)
	return nil
}

// Conformance runs suite twice, as the subtests "embedded-kfake" (a fresh embedded broker)
// and "apache-kafka" (the shared Apache Kafka broker, see Apache), logging which broker each
// run uses.
func Conformance(t *testing.T, suite func(t *testing.T, brokers []string)) {
	t.Helper()
	t.Run(EmbeddedName, func(t *testing.T) {
		brokers := Embedded(t)
		t.Logf("conformance: %s runs against the embedded kfake broker at %s", t.Name(), strings.Join(brokers, ","))
		suite(t, brokers)
	})
	t.Run(ApacheName, func(t *testing.T) {
		brokers := Apache(t)
		t.Logf("conformance: %s runs against Apache Kafka at %s", t.Name(), strings.Join(brokers, ","))
		suite(t, brokers)
	})
}

var notTopicChar = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// UniqueTopic returns a topic name that no other test uses: prefix, the test's name and a
// random suffix, with only the characters Kafka allows, at most 200 long.
func UniqueTopic(t testing.TB, prefix string) string {
	t.Helper()
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatalf("reading random bytes: %v", err)
	}
	name := notTopicChar.ReplaceAllString(prefix+"."+t.Name(), "_")
	if len(name) > 190 {
		name = name[:190]
	}
	return name + "." + hex.EncodeToString(rnd[:])
}
