package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
)

// tailUsage is printed by `tributary tail -h`.
const tailUsage = `tributary tail TOPIC [-from-beginning] [-n N] [-uncommitted] [-sealed]

Prints the records of a Kafka topic, one JSON object per line: topic, partition, offset,
timestamp, key, headers, and the value (as JSON when it is JSON, else as a string). It reads
the broker of KAFKA_BROKERS (and KAFKA_SASL_*, KAFKA_TLS*), or make run's embedded broker at
127.0.0.1:9092 when it is empty. By default it prints the records written from now on and
follows until Ctrl-C; only committed records (what Tributary's consumers see).

A record sealed with its user's data key (docs/security.md#crypto-shredding) is opened with
the keys of tributary.keys (and DATA_ENCRYPTION_KEY or CONFIG_ENCRYPTION_KEY, as the services
have them): its line says "sealed":"opened"; one whose key was shredded (its user deleted)
prints a null value and "sealed":"shredded". -sealed prints values as stored.

`

// tailRecord is one line of tail's output.
type tailRecord struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp string            `json:"timestamp"`
	Key       string            `json:"key"`
	Headers   map[string]string `json:"headers,omitempty"`
	Value     json.RawMessage   `json:"value"`
	// Sealed is "opened" for a value sealed with a data key and opened, "shredded" for one
	// whose key is gone (value null); empty for a plain value.
	Sealed string `json:"sealed,omitempty"`
}

// runTail is `tributary tail`: it prints records of a topic to out until ctx is done or it
// printed -n records.
func runTail(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("tributary tail", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprint(errOut, tailUsage); fs.PrintDefaults() }
	fromBeginning := fs.Bool("from-beginning", false, "start at the oldest record kept, not at the end")
	n := fs.Int("n", 0, "stop after this many records (0: follow until Ctrl-C)")
	uncommitted := fs.Bool("uncommitted", false, "also print records of transactions not committed (yet, or ever)")
	sealed := fs.Bool("sealed", false, "print sealed values as stored, without opening them")
	// The topic comes first (tail TOPIC -n 5); flags may also come first.
	var topic string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		topic, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if topic == "" && fs.NArg() > 0 {
		topic = fs.Arg(0)
	}
	if topic == "" {
		fs.Usage()
		return errors.New("tail: which topic? (e.g. tributary tail tracking.events -from-beginning)")
	}
	if *n < 0 {
		return fmt.Errorf("tail: -n %d is negative", *n)
	}
	kafka, err := platform.LoadKafkaSettings()
	if err != nil {
		return err
	}
	if len(kafka.Brokers) == 0 {
		kafka.Brokers = []string{"127.0.0.1:9092"} // make run's embedded broker
	}
	start := kgo.NewOffset().AtEnd()
	if *fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start)}
	if !*uncommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	logger := zerolog.New(errOut).Level(zerolog.WarnLevel)
	cl, err := platform.NewKafkaClient(kafka, logger, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// The keyring is started at the first sealed record, and stopped (and waited for) when
	// tail returns.
	var keys *shred.Keyring
	var keysRun sync.WaitGroup
	defer keysRun.Wait()
	kctx, stopKeys := context.WithCancel(ctx)
	defer stopKeys()
	openSealed := func(r *kgo.Record) (plain []byte, state string, err error) {
		if *sealed || shred.KeyOf(r) == nil {
			return r.Value, "", nil
		}
		if keys == nil {
			if keys, err = shred.New(shred.Config{Kafka: kafka, Logger: logger}); err != nil {
				return nil, "", err
			}
			keysRun.Go(func() { _ = keys.Run(kctx) })
			select {
			case <-keys.Ready():
			case <-ctx.Done():
				return nil, "", ctx.Err()
			}
		}
		switch plain, err := keys.Open(r); {
		case err == nil:
			return plain, "opened", nil
		case errors.Is(err, shred.ErrShredded):
			return nil, "shredded", nil
		default:
			return nil, "", fmt.Errorf("opening %s partition %d offset %d: %w", r.Topic, r.Partition, r.Offset, err)
		}
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	printed := 0
	for *n == 0 || printed < *n {
		fetches := cl.PollRecords(ctx, max(*n-printed, 0))
		if ctx.Err() != nil {
			return nil
		}
		var err error
		fetches.EachError(func(t string, p int32, ferr error) {
			err = errors.Join(err, fmt.Errorf("reading %s partition %d: %w", t, p, ferr))
		})
		if err != nil {
			return err
		}
		for _, r := range fetches.Records() {
			if *n > 0 && printed == *n {
				break
			}
			value, state, err := openSealed(r)
			if err != nil {
				return err
			}
			line := tailLine(r, value)
			line.Sealed = state
			if err := enc.Encode(line); err != nil {
				return err
			}
			printed++
		}
	}
	return nil
}

// tailLine is r's line, value its value (opened when it was sealed; nil for a tombstone or a
// shredded one).
func tailLine(r *kgo.Record, value []byte) tailRecord {
	line := tailRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano), Key: string(r.Key)}
	if len(r.Headers) > 0 {
		line.Headers = make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			line.Headers[h.Key] = string(h.Value)
		}
	}
	switch {
	case value == nil:
		line.Value = json.RawMessage("null") // a tombstone, or a value whose data key is gone
	case json.Valid(value):
		line.Value = value
	default:
		s, _ := json.Marshal(string(value))
		line.Value = s
	}
	return line
}

// commandMain runs a subcommand's run function as a command: Ctrl-C stops it, -h exits 0, an
// error is printed and exits 1.
func commandMain(run func(ctx context.Context, args []string, stdout, stderr io.Writer) error, args []string) int {
	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	if err := run(ctx, args, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "tributary:", err)
		return 1
	}
	return 0
}

// tailMain runs `tributary tail` as a command: Ctrl-C stops it.
func tailMain(args []string) int { return commandMain(runTail, args) }
