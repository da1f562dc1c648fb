package platform

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Durations in every log line of every service carry their unit: "4h0m0s", "250ms" (zerolog's
// default is a bare number of milliseconds).
func init() { zerolog.DurationFieldFormat = zerolog.DurationFormatString }

// NewLogger builds the one logger a main passes down: level is LOG_LEVEL (trace, debug, info,
// warn, error, fatal, panic, disabled; "" means info), and an unknown level is an error. Logs
// are JSON lines with a timestamp, or zerolog's coloured console format when w is a terminal.
func NewLogger(level string, w io.Writer) (zerolog.Logger, error) {
	lvl := zerolog.InfoLevel
	if level = strings.ToLower(strings.TrimSpace(level)); level != "" {
		var err error
		lvl, err = zerolog.ParseLevel(level)
		// ParseLevel also takes numbers ("4"); only the names are LOG_LEVEL values.
		if err != nil || lvl == zerolog.NoLevel || lvl.String() != level {
			return zerolog.Nop(), fmt.Errorf("LOG_LEVEL: unknown level %q (want trace, debug, info, warn, error or disabled)", level)
		}
	}
	if IsTerminal(w) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// IsTerminal reports whether w is a terminal (a character device, not a file or a pipe).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
