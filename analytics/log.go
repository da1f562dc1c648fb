package analytics

import (
	"log"
	"os"
	"strings"
)

// Logger receives the library's runtime log: batches sent, retries, failures. Lines never
// contain the write key or message contents. Implementations must be safe for concurrent use.
type Logger interface {
	// Logf records a routine event (a batch sent, a retry scheduled).
	Logf(format string, args ...any)
	// Errorf records a failure (messages given up on).
	Errorf(format string, args ...any)
}

// StdLogger adapts a standard library logger; Errorf lines are prefixed "ERROR: ".
func StdLogger(l *log.Logger) Logger { return stdLogger{l} }

type stdLogger struct{ l *log.Logger }

func (s stdLogger) Logf(format string, args ...any) { s.l.Printf(format, args...) }
func (s stdLogger) Errorf(format string, args ...any) {
	s.l.Printf("ERROR: "+format, args...)
}

// DebugEnv is the environment variable that turns logging on when it names "analytics"
// (docs/client.md#logging): DEBUG=analytics, or a comma- or space-separated list holding "analytics",
// "analytics*" or "*".
const DebugEnv = "DEBUG"

// debugEnabled reports whether the value of DEBUG asks for this library's log.
func debugEnabled(v string) bool {
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		if f == "*" || f == "analytics" || strings.HasPrefix(f, "analytics*") || strings.HasPrefix(f, "analytics:") {
			return true
		}
	}
	return false
}

// resolveLogger is the Logger in force: Client.Logger when set, else stderr when DEBUG asks
// for it, else none.
func resolveLogger(l Logger) Logger {
	if l != nil {
		return l
	}
	if debugEnabled(os.Getenv(DebugEnv)) {
		return StdLogger(log.New(os.Stderr, "analytics: ", log.LstdFlags|log.Lmicroseconds))
	}
	return nil
}
