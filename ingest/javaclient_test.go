package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestSegmentAnalyticsJava runs Segment's analytics-java (testdata/java/pom.xml: 3.5.1, from
// Maven Central), unmodified, against ingest: it posts its batches to /v1/import/ (with a
// trailing slash) with the write key in the body. Without java, javac or mvn the test is skipped
// loudly; TEST_JAVA_CLIENT=1 makes that a failure.
func TestSegmentAnalyticsJava(t *testing.T) {
	java, errJava := exec.LookPath("java")
	mvn, errMvn := exec.LookPath("mvn")
	servicetest.RequireRuntime(t, "TEST_JAVA_CLIENT", "the analytics-java test", "java and mvn", errors.Join(errJava, errMvn))
	libs := javaClientJars(t, mvn)
	h := newHarness(t)
	cmd := exec.Command(java, "-cp", filepath.Join(libs, "*"), "Send.java")
	cmd.Dir = filepath.Join("testdata", "java")
	cmd.Env = append(os.Environ(), "WRITE_KEY="+testKey, "INGEST_URL="+h.srv.URL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("analytics-java: %v\n%s", err, out)
	}
	checkClientMessages(t, h, "analytics-java", map[string]string{
		"java-1": "identify", "java-2": "track", "java-3": "page", "java-4": "screen", "java-5": "group", "java-6": "alias",
	})
}

// javaClientJars returns the folder of testdata/java/pom.xml's jars, fetched by Maven.
func javaClientJars(t *testing.T, mvn string) string {
	t.Helper()
	pom, err := filepath.Abs(filepath.Join("testdata", "java", "pom.xml"))
	if err != nil {
		t.Fatal(err)
	}
	return cachedFolder(t, "analytics-java", pom, "analytics-3.5.1.jar", func(dir string) error {
		cmd := exec.Command(mvn, "-B", "-q", "--no-transfer-progress", "-Dstyle.color=never", "-f", pom,
			"dependency:copy-dependencies", "-DoutputDirectory="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("mvn:\n%s", out)
		}
		return err
	})
}

// cachedFolder returns <repo>/.cache/<name>/<hash of spec> (under TRIBUTARY_CACHE_DIR when set),
// made by fill when it does not hold check yet: fill writes into a new folder, which is renamed
// into place only once fill succeeded, so a failed or interrupted fetch is tried again next time.
func cachedFolder(t *testing.T, name, spec, check string, fill func(dir string) error) string {
	t.Helper()
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	cache := os.Getenv("TRIBUTARY_CACHE_DIR")
	if cache == "" {
		cache = filepath.Join("..", ".cache")
	}
	dir, err := filepath.Abs(filepath.Join(cache, name, hex.EncodeToString(sum[:8])))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, check)); err == nil {
		return dir
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "filling-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		t.Fatalf("preparing %s: %v", name, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, check)); statErr != nil { // not made meanwhile by another run
			t.Fatal(err)
		}
	}
	return dir
}
