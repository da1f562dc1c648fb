package devstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFileName is the file in DATA_DIR that one running stack holds an exclusive lock on.
const lockFileName = "tributary.lock"

// lockDataDir takes the exclusive lock (flock) on DATA_DIR/tributary.lock and writes this
// process's id into the file, so that a second stack on the same folder — which would write
// into the first one's broker files — refuses to start, naming the process that holds it.
// The lock is released by the returned function, or by the kernel when the process ends,
// however it ends.
func lockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("DATA_DIR: %w", err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("DATA_DIR: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		raw, _ := os.ReadFile(path)
		f.Close()
		holder := "another process"
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(raw))); perr == nil && pid > 0 {
			holder = "process " + strconv.Itoa(pid)
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("DATA_DIR %s is in use by %s (another make run or tributary): stop it, or give this one its own DATA_DIR", dir, holder)
		}
		return nil, fmt.Errorf("DATA_DIR: locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
