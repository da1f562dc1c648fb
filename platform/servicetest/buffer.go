package servicetest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that several goroutines may write while a test reads it: the sink
// of a logger under test, or of a child process's output.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
