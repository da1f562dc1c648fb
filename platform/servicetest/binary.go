package servicetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build compiles the main package pkg ("./cmd/router", relative to the test's package
// directory) into the test's temporary directory and returns the binary's path. Tests that
// kill a real service process (SIGKILL) start it with Spawn.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("building %s: %v", pkg, err)
	}
	return bin
}

// Spawn starts bin with the test process's environment plus env ("KEY=value"), its standard
// error going to the test's. The process is killed and waited for on cleanup if the test has
// not done so.
func Spawn(t testing.TB, bin string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}
