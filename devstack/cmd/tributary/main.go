// Command tributary runs the whole of Tributary in one process: the embedded broker (unless
// KAFKA_BROKERS is set), topic bootstrap, the tenant config of CONFIG_FILE, and every service.
// It is what `make run` starts. Settings come from the environment: every service's, and its
// own; the table of docs/configuration.md#run-time-settings lists them (service "tributary").
//
// `tributary tail TOPIC [-from-beginning] [-n N]` prints a topic's records as JSON lines
// instead (see tail.go), against the embedded broker of a running `make run` or any Kafka.
// `tributary replay -destination ID -from TIME [-start]` counts or replays tracking.events to a
// destination through the console's API (see replay.go, docs/delivery.md#replay).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/platform"
)

func main() {
	platform.PrintVersionIfAsked("tributary")
	if len(os.Args) > 1 && os.Args[1] == "tail" {
		os.Exit(tailMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "replay" {
		os.Exit(replayMain(os.Args[2:]))
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tributary:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := devstack.ConfigFromEnv()
	if err != nil {
		return err
	}
	logger, err := platform.NewLogger(cfg.LogLevel, os.Stderr)
	if err != nil {
		return err
	}
	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	if cfg.Tracing.Enabled() { // the span exporters' errors in these logs (docs/operations.md#tracing)
		platform.LogTracingErrors(logger)
	}
	stack, err := devstack.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	printConsoleBanner(os.Stderr, stack, cfg.DataDir)
	if cfg.Audiences.Token == "" { // generated for DATA_DIR
		fmt.Fprintf(os.Stderr, "profile API: http://%s  bearer token in %s (generated; set AUDIENCES_TOKEN to choose your own)\n\n",
			stack.AudiencesAddr(), filepath.Join(cfg.DataDir, "audiences-token"))
	}
	logger.Info().Str("version", platform.Version).Msg("tributary is running; Ctrl-C stops it")
	err = stack.Run(ctx)
	logger.Info().Msg("tributary stopped")
	return err
}

// consoleInfo is what the start-up banner says of the console: *devstack.Stack.
type consoleInfo interface {
	ConsoleAddr() string
	ConsoleToken() (token string, generated bool)
}

var _ consoleInfo = (*devstack.Stack)(nil)

// printConsoleBanner tells where the console is and where its token is, never the token itself:
// stderr is where logs are collected (docs/security.md#the-console-token).
func printConsoleBanner(w io.Writer, stack consoleInfo, dataDir string) {
	if _, generated := stack.ConsoleToken(); generated {
		file := filepath.Join(dataDir, "console-token")
		fmt.Fprintf(w, "\nconsole: http://%s  sign in with the token in %s (cat %s; the API's Bearer token too)\n"+
			"  the token was generated for %s (mode 0600); set CONSOLE_TOKEN to choose your own\n\n",
			stack.ConsoleAddr(), file, file, dataDir)
		return
	}
	fmt.Fprintf(w, "\nconsole: http://%s  sign in with CONSOLE_TOKEN (the API's Bearer token too)\n\n", stack.ConsoleAddr())
}
