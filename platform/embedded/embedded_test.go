package embedded_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/tributary-cdp/tributary/platform/embedded"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	topic   = "persist.test"
	group   = "persist-group"
	records = 50
)

func start(t testing.TB, opts embedded.Options) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

func newClient(t testing.TB, b *embedded.Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// fill creates the topic, produces records and commits offset `records/2` for the group.
func fill(t testing.TB, b *embedded.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	for i := range records {
		r := &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing record %d: %v", i, err)
		}
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: records / 2, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("CommitOffsets: %v", err)
	}
}

// check reads the topic back and checks the group's committed offset.
func check(t *testing.T, b *embedded.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < records {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records before %v", got, records, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if want := "value-" + strconv.Itoa(int(r.Offset)); string(r.Value) != want {
				t.Errorf("offset %d = %q, want %q", r.Offset, r.Value, want)
			}
			got++
		})
	}
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	if o, ok := fetched.Lookup(topic, 0); !ok || o.At != records/2 {
		t.Errorf("committed offset = %+v (found %v), want %d", o, ok, records/2)
	}
}

func TestPersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	first, err := embedded.Start(embedded.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, first)
	first.Close()
	first.Close() // a second Close is harmless

	check(t, start(t, embedded.Options{DataDir: dir}))
}

func TestWithoutDataDirNothingPersists(t *testing.T) {
	b := start(t, embedded.Options{})
	ctx := context.Background()
	topics, err := kadm.NewClient(newClient(t, b)).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 0 {
		t.Errorf("a fresh broker has topics %v", topics.Names())
	}
}

func TestFixedPortAndHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	b := start(t, embedded.Options{Port: port, Host: "localhost"})
	addrs := b.Addrs()
	if len(addrs) != 1 || !strings.HasSuffix(addrs[0], ":"+strconv.Itoa(port)) {
		t.Fatalf("Addrs = %v, want port %d", addrs, port)
	}
	if err := newClient(t, b).Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if _, err := embedded.Start(embedded.Options{Port: port}); err == nil {
		t.Errorf("a second broker started on a taken port")
	}
	if _, err := embedded.Start(embedded.Options{Port: 70000}); err == nil {
		t.Errorf("Start accepted port 70000")
	}
}

// TestSurvivesKill checks that acknowledged records and committed offsets survive the broker's
// process being killed (SIGKILL: no Close, no final save). A child process (this test binary)
// runs the broker and fills it; the parent kills it and restarts on the same DataDir.
func TestSurvivesKill(t *testing.T) {
	if dir := os.Getenv("EMBEDDED_KILL_CHILD_DIR"); dir != "" {
		b, err := embedded.Start(embedded.Options{DataDir: dir})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fill(t, b)
		fmt.Println("filled")
		time.Sleep(time.Minute) // until killed
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := killedChild(t, "TestSurvivesKill", "EMBEDDED_KILL_CHILD_DIR")
	check(t, start(t, embedded.Options{DataDir: dir}))
}

// killedChild runs this test binary's test as a child with env set to a new data directory,
// waits for the child to print "filled", kills it (SIGKILL) and returns the directory.
func killedChild(t *testing.T, test, env string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	filled := false
	for lines.Scan() {
		if lines.Text() == "filled" {
			filled = true
			break
		}
		t.Logf("child: %s", lines.Text())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !filled {
		t.Fatal("the child did not fill its broker")
	}
	return dir
}

// BenchmarkProduce measures produce throughput of the embedded broker in memory, on disk, and
// on disk with SyncWrites (an fsync per batch), for docs/benchmarks.md. "sync-each" waits for
// each record before sending the next (one batch, and so one fsync, per record); "async" lets
// the client batch.
func BenchmarkProduce(b *testing.B) {
	value := []byte(strings.Repeat("x", 512))
	for _, mode := range []struct {
		name string
		opts func(dir string) embedded.Options
	}{
		{"memory", func(string) embedded.Options { return embedded.Options{} }},
		{"datadir", func(dir string) embedded.Options { return embedded.Options{DataDir: dir} }},
		{"datadir-syncwrites", func(dir string) embedded.Options { return embedded.Options{DataDir: dir, SyncWrites: true} }},
	} {
		for _, how := range []string{"sync-each", "async"} {
			b.Run(mode.name+"/"+how, func(b *testing.B) {
				br := start(b, mode.opts(b.TempDir()))
				cl := newClient(b, br, kgo.DefaultProduceTopic("bench"), kgo.AllowAutoTopicCreation())
				ctx := context.Background()
				if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, "bench"); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(value)))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					r := &kgo.Record{Value: value}
					if how == "sync-each" {
						if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
							b.Fatal(err)
						}
						continue
					}
					cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
						if err != nil {
							b.Error(err)
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// The broker compacts every CleanerInterval, not kfake's hourly default, so that a deleted
// profile's earlier records on audiences.state go within minutes (docs/topics.md#audiencesstate).
func TestCleanerInterval(t *testing.T) {
	b := start(t, embedded.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfgs, err := kadm.NewClient(newClient(t, b)).DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatInt(embedded.CleanerInterval.Milliseconds(), 10)
	got := ""
	for _, rc := range cfgs {
		for _, c := range rc.Configs {
			if c.Key == "log.cleaner.backoff.ms" {
				got = c.MaybeValue()
			}
		}
	}
	if got != want {
		t.Errorf("log.cleaner.backoff.ms = %q, want %s", got, want)
	}
}
