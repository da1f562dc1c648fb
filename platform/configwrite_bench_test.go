package platform_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
)

// BenchmarkApplyConfigFile: `tributary-init apply` of a file of 1,000 destinations that all
// change (one transaction of 1,000 records), on the embedded broker: the read of the topic,
// the checks and the write (docs/console.md#more-than-one-console).
//
//	go test -run '^$' -bench ApplyConfigFile -benchtime 10x ./platform/
func BenchmarkApplyConfigFile(b *testing.B) {
	s := platform.KafkaSettings{Brokers: kafkatest.Embedded(b), ReplicationFactor: -1, Partitions: 3}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := platform.NewKafkaClient(s, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	topic := kafkatest.UniqueTopic(b, "config")
	if err := platform.EnsureTopics(ctx, kadm.NewClient(cl), -1, []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for i := range b.N {
		var y strings.Builder
		y.WriteString("sources: [{id: web, writeKey: wk_bench_web}]\ndestinations:\n")
		for d := range 1000 {
			fmt.Fprintf(&y, "  - {id: d%d, type: webhooks, sources: [web], settings: {webhooks: [{url: \"https://hooks.example.com/%d/%d\"}]}}\n", d, d, i)
		}
		file := filepath.Join(dir, "bench.yaml")
		if err := os.WriteFile(file, []byte(y.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		if _, err := platform.ApplyConfigFile(ctx, s, topic, file, platform.ApplyOptions{}, zerolog.Nop()); err != nil {
			b.Fatal(err)
		}
	}
}
