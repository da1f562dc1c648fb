// Command deliverer POSTs webhooks.deliveries to the destinations' URLs, with retry tiers, a
// dead-letter queue and an attempt log (docs/delivery.md). Settings come from the environment:
// platform.NewCommand reads the KAFKA_* and common ones (METRICS_ADDR defaults to
// 127.0.0.1:9102 here), deliverer.ConfigFromEnv the service's; the table of
// docs/configuration.md#run-time-settings lists them all (service "deliverer"). GOMEMLIMIT,
// the Go runtime's, defaults to 160MiB here.
//
// `deliverer replay [-destination ID] [-message-id ID,...] [-since RFC3339] [-until RFC3339]
// [-again] [-dry-run] [-url URL]` re-enqueues dead letters into webhooks.deliveries with a fresh
// retry window (to URL instead of their destination's webhooks, with -url), marks them
// replayed (so that the same replay twice sends nothing twice) and prints how many;
// `deliverer dlq list [...] [-all]` lists them (docs/delivery.md#dead-letters-and-replay). Both
// are platform.ReplayDeadLetters and platform.ListDeadLetters, which the console uses too.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

func main() {
	platform.PrintVersionIfAsked("deliverer")
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "replay":
		err = replay(os.Args[2:], os.Stdout)
	case len(os.Args) > 2 && os.Args[1] == "dlq" && os.Args[2] == "list":
		err = list(os.Args[3:], os.Stdout)
	case len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-"):
		err = fmt.Errorf("unknown command %q: want no argument (the service), replay, or dlq list", strings.Join(os.Args[1:], " "))
	default:
		err = serve()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deliverer:", err)
		os.Exit(1)
	}
}

func settings() (platform.KafkaSettings, error) {
	kafka, err := platform.LoadKafkaSettings()
	if err == nil {
		err = kafka.Validate()
	}
	return kafka, err
}

// dlqFlags are the filter flags replay and dlq list share.
type dlqFlags struct {
	fs           *flag.FlagSet
	dest         *string
	messageIDs   *string
	since, until *string
}

func newDLQFlags(name, verb string) dlqFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return dlqFlags{fs: fs,
		dest:       fs.String("destination", "", verb+" only this destination's dead letters"),
		messageIDs: fs.String("message-id", "", verb+" only the dead letters of these message ids (comma-separated)"),
		since:      fs.String("since", "", verb+" only dead letters written at or after this time (RFC 3339)"),
		until:      fs.String("until", "", verb+" only dead letters written at or before this time (RFC 3339)"),
	}
}

// filter parses the flags into a filter, and checks that the destination exists.
func (d dlqFlags) filter(ctx context.Context, kafka platform.KafkaSettings, logger zerolog.Logger) (platform.ReplayFilter, error) {
	f := platform.ReplayFilter{DestinationID: *d.dest}
	for id := range strings.SplitSeq(*d.messageIDs, ",") {
		if id = strings.TrimSpace(id); id != "" {
			f.MessageIDs = append(f.MessageIDs, id)
		}
	}
	for _, t := range []struct {
		name, s string
		dst     *time.Time
	}{{"-since", *d.since, &f.Since}, {"-until", *d.until, &f.Until}} {
		if t.s == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.s)
		if err != nil {
			return f, fmt.Errorf("%s: %q is not an RFC 3339 time (2026-11-24T09:00:00Z)", t.name, t.s)
		}
		*t.dst = v
	}
	if f.DestinationID != "" {
		ids, err := destinationIDs(ctx, kafka, logger)
		if err != nil {
			return f, err
		}
		if !slices.Contains(ids, f.DestinationID) {
			return f, fmt.Errorf("-destination %s: no such destination in the config (it has: %s)", f.DestinationID, strings.Join(ids, ", "))
		}
	}
	return f, nil
}

// destinationIDs reads the config topic and returns the destinations' ids.
func destinationIDs(ctx context.Context, kafka platform.KafkaSettings, logger zerolog.Logger) ([]string, error) {
	store, err := platform.NewConfigStore(kafka, schemas.TopicConfig, logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- store.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-store.Ready():
	case <-ctx.Done():
		return nil, fmt.Errorf("reading the config (%s): %w", schemas.TopicConfig, ctx.Err())
	}
	var ids []string
	for _, d := range store.Snapshot().Destinations() {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	return ids, nil
}

// cli is what replay and dlq list need: the settings, a logger, a signal context.
func cli() (context.Context, func(), platform.KafkaSettings, zerolog.Logger, error) {
	kafka, err := settings()
	if err != nil {
		return nil, nil, kafka, zerolog.Nop(), err
	}
	common, err := platform.CommandSettingsFromEnv()
	if err != nil {
		return nil, nil, kafka, zerolog.Nop(), err
	}
	level := common.LogLevel
	if os.Getenv("LOG_LEVEL") == "" {
		level = "warn" // a command's output is its answer, not the client's chatter
	}
	logger, err := platform.NewLogger(level, os.Stderr)
	if err != nil {
		return nil, nil, kafka, zerolog.Nop(), err
	}
	ctx, stop := platform.SignalContext(context.Background())
	return ctx, stop, kafka, logger, nil
}

// dlqCommand parses args with d's flags, sets up the settings, a logger and a signal context,
// builds the filter (again: also dead letters replayed before) and calls run with them.
func dlqCommand(d dlqFlags, args []string, again *bool, run func(context.Context, platform.KafkaSettings, zerolog.Logger, platform.ReplayFilter) error) error {
	if err := d.fs.Parse(args); err != nil {
		return err
	}
	ctx, stop, kafka, logger, err := cli()
	if err != nil {
		return err
	}
	defer stop()
	f, err := d.filter(ctx, kafka, logger)
	if err != nil {
		return err
	}
	f.Again = *again
	return run(ctx, kafka, logger, f)
}

func replay(args []string, out io.Writer) error {
	d := newDLQFlags("deliverer replay", "replay")
	again := d.fs.Bool("again", false, "also replay dead letters replayed before")
	dryRun := d.fs.Bool("dry-run", false, "list what would be replayed; replay nothing")
	toURL := d.fs.String("url", "", "send the replayed dead letters to this URL only, instead of their destination's webhooks (signed with its secret, with its first webhook's headers)")
	return dlqCommand(d, args, again, func(ctx context.Context, kafka platform.KafkaSettings, logger zerolog.Logger, f platform.ReplayFilter) error {
		skipped := map[string]int{}
		got, err := platform.ReplayDeadLetters(ctx, kafka, logger, platform.DefaultReplayTopics, f, platform.ReplayOptions{DryRun: *dryRun, URL: *toURL,
			Skipped: func(_ platform.DeadLetter, reason string) { skipped[reason]++ }})
		for _, why := range []string{platform.ForgetDeleted, platform.ForgetSuppressed} {
			if skipped[why] > 0 {
				fmt.Fprintf(out, "skipped %d dead letters of %s users (docs/delivery.md#deleted-and-suppressed-users)\n", skipped[why], why)
			}
		}
		if *dryRun {
			printDeadLetters(out, got)
			fmt.Fprintf(out, "would replay %d dead letters (-dry-run)\n", len(got))
		} else {
			fmt.Fprintf(out, "replayed %d dead letters\n", len(got))
		}
		if err == nil && len(got) == 0 && !f.Again {
			fmt.Fprintln(out, "(dead letters replayed before are left alone: -again replays them once more)")
		}
		return err
	})
}

func list(args []string, out io.Writer) error {
	d := newDLQFlags("deliverer dlq list", "list")
	all := d.fs.Bool("all", false, "also list dead letters replayed before")
	return dlqCommand(d, args, all, func(ctx context.Context, kafka platform.KafkaSettings, logger zerolog.Logger, f platform.ReplayFilter) error {
		got, err := platform.ListDeadLetters(ctx, kafka, logger, platform.DefaultReplayTopics, f)
		printDeadLetters(out, got)
		return err
	})
}

// printDeadLetters prints a table: when, destination, message id, reason, last status,
// replayed.
func printDeadLetters(out io.Writer, ds []platform.DeadLetter) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "DEAD-LETTERED\tDESTINATION\tMESSAGE ID\tREASON\tLAST STATUS\tREPLAYED")
	for _, d := range ds {
		replayed := "-"
		if !d.ReplayedAt.IsZero() {
			replayed = schemas.FormatTimestamp(d.ReplayedAt)
		}
		status := d.LastStatus
		if status == "" || status == "0" {
			status = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", schemas.FormatTimestamp(d.At), d.DestinationID, d.MessageID, d.Reason, status, replayed)
	}
	_ = w.Flush()
}

// defaultMemoryLimit is the Go runtime's soft memory limit unless GOMEMLIMIT is set: a burst
// (a backlog handed to the retry tiers) then makes the collector run sooner instead of letting
// the heap double. It is soft: a deliverer that needs more still gets it. platform.NewCommand
// lowers it to 90% of the container's memory limit when that is lower (docs/operations.md#memory).
const defaultMemoryLimit = 160 << 20

func serve() error {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	cmd, err := platform.NewCommand()
	if err != nil {
		return err
	}
	if err := cmd.Trace("deliverer"); err != nil { // OTEL_*: docs/operations.md#tracing
		return err
	}
	cfg, err := deliverer.ConfigFromEnv()
	if err != nil {
		return err
	}
	svc, err := deliverer.New(cfg, deliverer.Deps{
		Deps:        cmd.Deps(),
		Config:      func() deliverer.Destinations { return cmd.Store.Snapshot() },
		ConfigReady: cmd.Store.Ready(),
	})
	if err != nil {
		return err
	}
	return cmd.Run(cmd.MetricsServer("127.0.0.1:9102"), svc)
}
