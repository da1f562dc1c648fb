package ingest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestSegmentAnalyticsPython runs Segment's analytics-python (testdata/python/requirements.txt:
// segment-analytics-python 2.4.0, from PyPI), unmodified, against ingest: it posts its batches
// to /v1/batch with the write key in the body. The test makes a virtual environment in
// <repo>/.cache once per version of requirements.txt. Without python3 (and its venv module) it
// is skipped loudly; TEST_PYTHON_CLIENT=1 makes that a failure.
func TestSegmentAnalyticsPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(python, "-c", "import venv, ensurepip").Run()
	}
	servicetest.RequireRuntime(t, "TEST_PYTHON_CLIENT", "the analytics-python test", "python3 with its venv module", err)
	venv := cachedFolder(t, "analytics-python", filepath.Join("testdata", "python", "requirements.txt"), "bin/python", func(dir string) error {
		req, err := filepath.Abs(filepath.Join("testdata", "python", "requirements.txt"))
		if err != nil {
			return err
		}
		for _, args := range [][]string{
			{python, "-m", "venv", dir},
			{filepath.Join(dir, "bin", "pip"), "install", "-q", "--disable-pip-version-check", "-r", req},
		} {
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Logf("%v:\n%s", args, out)
				return err
			}
		}
		return nil
	})
	h := newHarness(t)
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "send.py")
	cmd.Dir = filepath.Join("testdata", "python")
	cmd.Env = append(os.Environ(), "WRITE_KEY="+testKey, "INGEST_URL="+h.srv.URL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("analytics-python: %v\n%s", err, out)
	}
	checkClientMessages(t, h, "analytics-python", map[string]string{
		"python-1": "identify", "python-2": "track", "python-3": "page", "python-4": "screen", "python-5": "group", "python-6": "alias",
	})
}
