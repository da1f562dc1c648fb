// Command receiver is a demo webhook endpoint for Tributary: it verifies each POST's signature,
// drops duplicates by message id, logs one JSON line per webhook on stdout and answers 200.
// It is the other end of `make run` (deploy/config/dev.yaml posts to
// http://127.0.0.1:9000/webhook with sharedSecret dev-secret):
//
//	RECEIVER_SHARED_SECRET=dev-secret go run ./devstack/cmd/receiver
//
// Settings (environment):
//
//	RECEIVER_ADDR                    listen address (default 127.0.0.1:9000)
//	RECEIVER_SHARED_SECRET           the destination's sharedSecret; empty: nothing is verified
//	RECEIVER_PREVIOUS_SHARED_SECRET  a second secret also accepted, for a rotation
//	RECEIVER_STANDARD_WEBHOOKS       true: verify webhook-id/-timestamp/-signature instead of
//	                                 X-Signature (needs RECEIVER_SHARED_SECRET)
//	RECEIVER_TIMESTAMP_TOLERANCE     how far webhook-timestamp may be from the clock (default 5m)
//	RECEIVER_DEDUP_SIZE              how many message ids are remembered (default 100000)
//	RECEIVER_DELAY                   answer each webhook this much later (default 0s): try
//	                                 Tributary against a slow endpoint
//
// Any path takes a POST; GET /healthz answers 200. A bad or missing signature, or a
// webhook-timestamp too far from the clock, gets 401 (which Tributary does not retry: the
// message goes to the dead-letter topic). docs/receivers.md describes what arrives and how to
// verify it; examples/receivers/ holds receivers in Go, Node and Python.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := loadConfig(nil)
	if err != nil {
		return err
	}
	// Always JSON, also on a terminal: one line per webhook is the point of this command.
	logger := zerolog.New(os.Stdout).With().Timestamp().Str("service", "receiver").Logger()
	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	srv := newServer(cfg, logger)
	if err := srv.Listen(); err != nil {
		return err
	}
	if cfg.SharedSecret == "" {
		logger.Warn().Msg("RECEIVER_SHARED_SECRET is not set: signatures are not verified")
	}
	logger.Info().Str("addr", srv.Addr()).Str("verify", cfg.verifyMode()).
		Bool("rotation", cfg.PreviousSharedSecret != "").Msg("receiver ready")
	return srv.Run(ctx)
}
