package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestComposeTopology runs the Tributary services of docker-compose.yml as processes, each with
// exactly the environment and command its container gets, against Apache Kafka, and sends the
// first event through them (see the package documentation for how names and ports are mapped).
func TestComposeTopology(t *testing.T) {
	brokers := kafkatest.Apache(t)
	root := repoRoot(t)
	df := parseDockerfile(t, filepath.Join(root, "deploy/docker/Dockerfile"))
	cf := parseCompose(t, filepath.Join(root, "docker-compose.yml"))
	topo := newTopology(t, root, df, cf, strings.Join(brokers, ","))
	t.Logf("compose topology against Apache Kafka at %s: %s", strings.Join(brokers, ","), strings.Join(topo.order, " → "))

	start := time.Now()
	bins := buildBinaries(t, root, df, cf)
	t.Logf("built %d binaries in %s", len(bins), time.Since(start).Round(time.Millisecond))

	start = time.Now()
	for _, name := range topo.order {
		topo.start(name, bins)
	}
	t.Logf("every service up (in depends_on order, healthchecks passing) in %s", time.Since(start).Round(time.Millisecond))

	// The first event, to ingest's published port, with the write key of the mounted config.
	ingestURL := topo.publishedURL("ingest", 8080)
	writeKey := topo.writeKey()
	id := "compose-" + randomHex(t)
	body := fmt.Sprintf(`{"userId":"%s","event":"Compose Topology","messageId":"%s","properties":{"ok":true}}`, id, id)
	req, err := http.NewRequest(http.MethodPost, ingestURL+"/v1/track", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(writeKey, "")
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		topo.dumpLogs()
		t.Fatalf("POST /v1/track: %v", err)
	}
	respBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		topo.dumpLogs()
		t.Fatalf("POST /v1/track: %s: %s", resp.Status, respBody)
	}

	// The demo receiver logs one JSON line per webhook, after checking X-Signature with the
	// secret compose gives it: the webhook must be there, verified.
	line, ok := topo.waitLog("receiver", 90*time.Second, func(m map[string]any) bool {
		return m["message"] == "webhook" && m["message_id"] == id
	})
	if !ok {
		topo.dumpLogs()
		t.Fatalf("the receiver did not log webhook %s within 90s", id)
	}
	t.Logf("webhook %s arrived %s after the track call: %s", id, time.Since(sent).Round(time.Millisecond), line["verify"])
	if line["verify"] != "x-signature" || line["signature_ok"] != true || line["type"] != "track" ||
		line["event"] != "Compose Topology" || line["user_id"] != id || line["status"] != float64(200) {
		t.Errorf("receiver log line: %v; want a track verified with x-signature, answered 200", line)
	}

	// The rest of the end-to-end suite through the compose wiring: a batch with every call type
	// (each arrives, verified, as its own webhook), and a message switched off with
	// integrations All:false (routed nowhere).
	types := []string{"identify", "page", "screen", "group", "alias"}
	var batch []string
	for _, typ := range types {
		m := fmt.Sprintf(`{"type":%q,"userId":"%s-%s","messageId":"%s-%s"`, typ, id, typ, id, typ)
		switch typ {
		case "identify":
			m += `,"traits":{"plan":"pro"}`
		case "page", "screen":
			m += `,"name":"Home"`
		case "group":
			m += `,"groupId":"g1"`
		case "alias":
			m += fmt.Sprintf(`,"previousId":"%s-anon"`, id)
		}
		batch = append(batch, m+"}")
	}
	batch = append(batch, fmt.Sprintf(`{"type":"track","userId":"%s","event":"Switched Off","messageId":"%s-off","integrations":{"All":false}}`, id, id))
	req, _ = http.NewRequest(http.MethodPost, ingestURL+"/v1/batch", strings.NewReader(`{"batch":[`+strings.Join(batch, ",")+`]}`))
	req.SetBasicAuth(writeKey, "")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/batch: %v", err)
	}
	respBody, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(respBody)) != `{"success":true}` {
		t.Fatalf("POST /v1/batch: %s: %s", resp.Status, respBody)
	}
	for _, typ := range types {
		mid := id + "-" + typ
		line, ok := topo.waitLog("receiver", 60*time.Second, func(m map[string]any) bool {
			return m["message"] == "webhook" && m["message_id"] == mid
		})
		if !ok {
			topo.dumpLogs()
			t.Fatalf("the receiver did not log webhook %s", mid)
		}
		if line["type"] != typ || line["signature_ok"] != true {
			t.Errorf("%s: receiver log line %v", typ, line)
		}
	}
	time.Sleep(time.Second)
	if _, ok := topo.waitLog("receiver", 10*time.Millisecond, func(m map[string]any) bool {
		return m["message"] == "webhook" && m["message_id"] == id+"-off"
	}); ok {
		t.Error("a message with integrations All:false was delivered")
	}

	// Audiences read the same tracking.events: its profile API, on its published port, asks for
	// the token compose gives it and knows the users of the calls above (the identify's traits
	// merged into the profile).
	audiencesURL := topo.publishedURL("audiences", 8091)
	audiencesToken := topo.rawEnv("audiences")["AUDIENCES_TOKEN"]
	if status, body := getWithToken(t, audiencesURL+"/v1/profiles/"+id, ""); status != http.StatusUnauthorized {
		t.Errorf("GET /v1/profiles/%s without a token: %d %s, want 401", id, status, body)
	}
	for user, plan := range map[string]any{id: nil, id + "-identify": "pro"} {
		prof, ok := waitProfile(audiencesURL, audiencesToken, user, 60*time.Second)
		if !ok {
			topo.dumpLogs()
			t.Fatalf("GET %s/v1/profiles/%s: no profile within 60s (last answer: %s)", audiencesURL, user, prof)
		}
		var p struct {
			UserID string         `json:"userId"`
			Traits map[string]any `json:"traits"`
		}
		if err := json.Unmarshal([]byte(prof), &p); err != nil || p.UserID != user || p.Traits["plan"] != plan {
			t.Errorf("GET /v1/profiles/%s: %s; want userId %s and traits.plan %v", user, prof, user, plan)
		}
	}

	// The console's admin API, on its published port, asks for the bearer token compose gives
	// it, and lists the sources of the mounted tenant config.
	consoleURL := topo.publishedURL("console", 8090)
	token := topo.rawEnv("console")["CONSOLE_TOKEN"]
	if token == "" {
		t.Fatal("docker-compose.yml gives the console no CONSOLE_TOKEN")
	}
	if status, body := getWithToken(t, consoleURL+"/v1/sources", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /v1/sources without a token: %d %s, want 401", status, body)
	}
	// A page of another name re-pointed at 127.0.0.1 (DNS rebinding) gets 421, even with the
	// token; the published port's own name is answered (docs/security.md#dns-rebinding).
	if status, body := getWithHost(t, consoleURL+"/v1/sources", "rebind.evil.example", token); status != http.StatusMisdirectedRequest {
		t.Errorf("GET /v1/sources with Host rebind.evil.example: %d %s, want 421", status, body)
	}
	if status, body := getWithHost(t, consoleURL+"/v1/sources", "localhost", token); status != http.StatusOK {
		t.Errorf("GET /v1/sources with Host localhost: %d %s, want 200", status, body)
	}
	status, body := getWithToken(t, consoleURL+"/v1/sources", token)
	type source struct {
		ID string `json:"id"`
	}
	var sources struct {
		Data []source `json:"data"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &sources) != nil ||
		!slices.ContainsFunc(sources.Data, func(s source) bool { return s.ID == "web" }) {
		topo.dumpLogs()
		t.Fatalf("GET %s/v1/sources with the compose token: %d %s; want 200 listing source web", consoleURL, status, body)
	}

	// The console's web UI on the same port: signed in with the token, its profile lookup asks
	// the audiences service at CONSOLE_AUDIENCES_URL (the compose network's audiences:8091) and
	// shows the identify's trait.
	ui := signInUI(t, consoleURL, token)
	user := id + "-identify"
	status, body = getUI(t, ui, consoleURL+"/audiences/profile?userId="+url.QueryEscape(user))
	if status != http.StatusOK || !strings.Contains(body, "<code>plan</code></td><td>pro</td>") {
		topo.dumpLogs()
		t.Fatalf("the UI's profile lookup of %s: %d; want 200 with the trait plan = pro from the audiences service:\n%s", user, status, tail([]byte(body), 40))
	}

	// docker compose down sends SIGTERM: every service stops cleanly, with status 0.
	topo.stopAll()
}

// signInUI signs in to the console's web UI at baseURL with the token and returns a client
// that carries the session cookie.
func signInUI(t *testing.T, baseURL, token string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := client.PostForm(baseURL+"/signin", url.Values{"token": {token}, "next": {"/"}})
	if err != nil {
		t.Fatalf("POST %s/signin: %v", baseURL, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("signing in to the UI at %s: %s at %s; want the overview (200 at /):\n%s", baseURL, resp.Status, resp.Request.URL, tail(body, 20))
	}
	return client
}

// getUI GETs a page of the UI with a signed-in client and returns the status and body.
func getUI(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body)
}

// getWithToken GETs url with the bearer token (none when empty) and returns the status and
// body.
func getWithToken(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return getWithHost(t, url, "", token)
}

// getWithHost is getWithToken with the Host header host (the URL's when empty).
func getWithHost(t *testing.T, url, host, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// topology is the compose file mapped onto this machine.
type topology struct {
	t       *testing.T
	root    string
	df      *dockerfile
	cf      *composeFile
	brokers string
	order   []string                 // Tributary services in depends_on order
	ports   map[string]map[int]int   // service → container port → local port
	files   map[string]string        // container path → local file
	procs   map[string]*process      // running or exited services
	logs    map[string]*syncedBuffer // every service's output
	mu      sync.Mutex
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

var (
	listenAny  = regexp.MustCompile(`0\.0\.0\.0:(\d+)`)
	hostPort   = regexp.MustCompile(`\b([a-z0-9][a-z0-9_-]*):(\d+)\b`)
	urlPattern = regexp.MustCompile(`https?://[^\s"']+`)
)

func newTopology(t *testing.T, root string, df *dockerfile, cf *composeFile, brokers string) *topology {
	tp := &topology{
		t: t, root: root, df: df, cf: cf, brokers: brokers,
		ports: map[string]map[int]int{}, files: map[string]string{},
		procs: map[string]*process{}, logs: map[string]*syncedBuffer{},
	}
	services := cf.tributaryServices()
	// Free local ports for every 0.0.0.0:PORT a service listens on (image ENV or compose env).
	for _, name := range services {
		env := tp.rawEnv(name)
		tp.ports[name] = map[int]int{}
		for _, v := range env {
			for _, m := range listenAny.FindAllStringSubmatch(v, -1) {
				p, _ := strconv.Atoi(m[1])
				if _, ok := tp.ports[name][p]; !ok {
					tp.ports[name][p] = freePort(t)
				}
			}
		}
	}
	// depends_on order; only Tributary services and the kafka service may be named.
	seen := map[string]bool{}
	var visit func(name string, path []string)
	visit = func(name string, path []string) {
		if slices.Contains(path, name) {
			t.Fatalf("docker-compose.yml: depends_on cycle %s → %s", strings.Join(path, " → "), name)
		}
		if seen[name] {
			return
		}
		s, ok := cf.Services[name]
		if !ok {
			t.Fatalf("docker-compose.yml: depends_on names %q, which is not a service", name)
		}
		for _, dep := range slices.Sorted(maps.Keys(s.DependsOn)) {
			visit(dep, append(path, name))
		}
		seen[name] = true
		if s.Build != nil {
			tp.order = append(tp.order, name)
		}
	}
	for _, name := range services {
		visit(name, nil)
	}
	// Bind-mounted files, rewritten when they name a service.
	for _, name := range services {
		for _, v := range cf.Services[name].Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
				continue // a named volume
			}
			src := filepath.Join(root, parts[0])
			data, err := os.ReadFile(src)
			if err != nil {
				t.Fatalf("service %s: volume %s: %v", name, v, err)
			}
			local := src
			if rewritten := tp.rewrite(string(data)); rewritten != string(data) {
				local = filepath.Join(t.TempDir(), filepath.Base(src))
				if err := os.WriteFile(local, []byte(rewritten), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			tp.files[parts[1]] = local
		}
	}
	t.Cleanup(tp.stopAll)
	return tp
}

// rawEnv is a service's container environment: the image's ENV, then compose's.
func (tp *topology) rawEnv(name string) map[string]string {
	s := tp.cf.Services[name]
	env, _, _ := tp.df.image(s.Build.Target)
	for k, v := range s.Environment {
		env[k] = *v
	}
	return env
}

// rewrite maps container addresses to local ones: 0.0.0.0:PORT of a service (in its own
// environment) is done by env; here <service>:<port> becomes 127.0.0.1:<its local port>, and
// the kafka service's address becomes the Apache Kafka broker.
func (tp *topology) rewrite(s string) string {
	return hostPort.ReplaceAllStringFunc(s, func(m string) string {
		sub := hostPort.FindStringSubmatch(m)
		svc, port := sub[1], sub[2]
		p, _ := strconv.Atoi(port)
		if svc == "kafka" {
			if _, ok := tp.cf.Services["kafka"]; ok {
				return tp.brokers
			}
		}
		if local, ok := tp.ports[svc][p]; ok {
			return fmt.Sprintf("127.0.0.1:%d", local)
		}
		if _, ok := tp.cf.Services[svc]; ok {
			tp.t.Fatalf("%q names service %s on port %d, on which it does not listen", s, svc, p)
		}
		return m
	})
}

// env is the environment a service's process runs with, mapped to this machine.
func (tp *topology) env(name string) []string {
	var out []string
	for k, v := range tp.rawEnv(name) {
		v = listenAny.ReplaceAllStringFunc(v, func(m string) string {
			p, _ := strconv.Atoi(listenAny.FindStringSubmatch(m)[1])
			return fmt.Sprintf("127.0.0.1:%d", tp.ports[name][p])
		})
		v = tp.rewrite(v)
		if local, ok := tp.files[v]; ok {
			v = local
		}
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// args is what the container runs: ENTRYPOINT (compose's, else the image's) and CMD
// (compose's command, else the image's).
func (tp *topology) args(name string) []string {
	s := tp.cf.Services[name]
	_, entry, cmd := tp.df.image(s.Build.Target)
	if s.Entrypoint != nil {
		entry, cmd = s.Entrypoint, nil
	}
	if s.Command != nil {
		cmd = s.Command
	}
	return append(slices.Clone(entry), cmd...)
}

// start waits for the service's dependencies as compose does, then starts it and waits until
// its healthcheck passes (if it has one).
func (tp *topology) start(name string, bins map[string]string) {
	t := tp.t
	s := tp.cf.Services[name]
	for _, dep := range slices.Sorted(maps.Keys(s.DependsOn)) {
		cond := s.DependsOn[dep].Condition
		if _, ok := tp.procs[dep]; !ok {
			if tp.cf.Services[dep].Build == nil {
				continue // kafka: the Apache Kafka broker of APACHE_KAFKA_BROKERS stands in
			}
			t.Fatalf("service %s depends on %s, which has not started", name, dep)
		}
		switch cond {
		case "service_completed_successfully":
			p := tp.procs[dep]
			select {
			case <-p.done:
			case <-time.After(3 * time.Minute):
				tp.dumpLogs()
				t.Fatalf("service %s waits for %s to complete; it still runs after 3m", name, dep)
			}
			if p.err != nil {
				tp.dumpLogs()
				t.Fatalf("service %s depends on %s completing successfully; it ended with %v", name, dep, p.err)
			}
		case "service_healthy", "service_started", "":
			// service_healthy: start waited for the healthcheck already.
		default:
			t.Fatalf("service %s: unknown depends_on condition %q", name, cond)
		}
	}
	argv := tp.args(name)
	if len(argv) == 0 {
		t.Fatalf("service %s: no ENTRYPOINT", name)
	}
	bin, ok := bins[filepath.Base(argv[0])]
	if !ok {
		t.Fatalf("service %s runs %s, which the Dockerfile's build stage does not build", name, argv[0])
	}
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Env = tp.env(name)
	buf := &syncedBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	tp.mu.Lock()
	tp.procs[name], tp.logs[name] = p, buf
	tp.mu.Unlock()
	t.Logf("started %s: %s %s", name, strings.Join(argv, " "), strings.Join(cmd.Env, " "))

	if s.Healthcheck != nil {
		tp.waitHealthy(name, s.Healthcheck.Test, 2*time.Minute)
		// The image's HEALTHCHECK (used by plain `docker run`) must pass as well.
		if st := tp.df.Stages[s.Build.Target]; st.Healthcheck != nil {
			tp.waitHealthy(name, append([]string{"CMD"}, st.Healthcheck...), 10*time.Second)
		}
	}
}

// waitHealthy runs a compose healthcheck (CMD wget ... URL): GET the URL, mapped to the
// service's local port, until it answers 200.
func (tp *topology) waitHealthy(name string, test []string, timeout time.Duration) {
	t := tp.t
	if len(test) < 2 || test[0] != "CMD" || test[1] != "wget" {
		t.Fatalf("service %s: healthcheck %q: deploytest understands [CMD, wget, ..., URL]", name, test)
	}
	raw := urlPattern.FindString(strings.Join(test, " "))
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("service %s: healthcheck %q: want a URL on 127.0.0.1 inside the container", name, test)
	}
	port, _ := strconv.Atoi(u.Port())
	local, ok := tp.ports[name][port]
	if !ok {
		t.Fatalf("service %s: healthcheck %s: the service does not listen on port %d", name, raw, port)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", local)
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 3 * time.Second}
	for {
		resp, err := client.Get(u.String())
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-tp.procs[name].done:
			tp.dumpLogs()
			t.Fatalf("service %s exited before it was healthy: %v", name, tp.procs[name].err)
		default:
		}
		if time.Now().After(deadline) {
			tp.dumpLogs()
			t.Fatalf("service %s: healthcheck %s not passing after %s (last: %v)", name, raw, timeout, statusOf(resp, err))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func statusOf(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// publishedURL returns the local URL of a port that the service publishes to the host
// (ports: "[ip:]host:container"), failing if it does not publish it.
func (tp *topology) publishedURL(name string, containerPort int) string {
	t := tp.t
	for _, p := range tp.cf.Services[name].Ports {
		parts := strings.Split(p, ":")
		c, _ := strconv.Atoi(parts[len(parts)-1])
		if c != containerPort {
			continue
		}
		local, ok := tp.ports[name][c]
		if !ok {
			t.Fatalf("service %s publishes %s, but listens on no 0.0.0.0:%d", name, p, c)
		}
		return fmt.Sprintf("http://127.0.0.1:%d", local)
	}
	t.Fatalf("service %s does not publish port %d", name, containerPort)
	return ""
}

// writeKey is the first source's write key in the config file CONFIG_FILE of the init
// service names.
func (tp *topology) writeKey() string {
	t := tp.t
	for _, name := range tp.order {
		v, ok := tp.rawEnv(name)["CONFIG_FILE"]
		if !ok {
			continue
		}
		cfg, err := schemas.LoadConfigFile(tp.files[v])
		if err != nil {
			t.Fatalf("service %s: CONFIG_FILE %s: %v", name, v, err)
		}
		for _, s := range cfg.Sources {
			if s.WriteKey != "" {
				return s.WriteKey
			}
		}
	}
	t.Fatal("no service applies a CONFIG_FILE with a source that has a writeKey")
	return ""
}

// waitLog waits for a JSON log line of the service that match accepts.
func (tp *topology) waitLog(name string, timeout time.Duration, match func(map[string]any) bool) (map[string]any, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(bytes.NewReader(tp.logs[name].Bytes()))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && match(m) {
				return m, true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, false
}

// stopAll sends SIGTERM to every running service, the last started first (as `docker compose
// down` does), and expects each to exit with status 0 within 30s.
func (tp *topology) stopAll() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for i := len(tp.order) - 1; i >= 0; i-- {
		name := tp.order[i]
		p, ok := tp.procs[name]
		if !ok {
			continue
		}
		delete(tp.procs, name)
		select {
		case <-p.done:
			if name != "init" && !tp.t.Failed() && p.err != nil {
				tp.t.Errorf("service %s had exited: %v", name, p.err)
			}
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.err != nil {
				tp.t.Errorf("service %s: SIGTERM: exited with %v\n%s", name, p.err, tail(tp.logs[name].Bytes(), 20))
			}
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			tp.t.Errorf("service %s did not stop within 30s of SIGTERM", name)
		}
	}
}

// dumpLogs logs the last lines of every service's output.
func (tp *topology) dumpLogs() {
	for _, name := range tp.order {
		if b, ok := tp.logs[name]; ok {
			tp.t.Logf("---- %s (last 40 lines)\n%s", name, tail(b.Bytes(), 40))
		}
	}
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// buildBinaries builds, as the Dockerfile's build stage does (static, -trimpath), the binary of
// every Tributary service of the compose file, into a temporary folder.
func buildBinaries(t *testing.T, root string, df *dockerfile, cf *composeFile) map[string]string {
	dir := t.TempDir()
	var pkgs []string
	bins := map[string]string{}
	for _, name := range cf.tributaryServices() {
		target := cf.Services[name].Build.Target
		pkg, ok := df.packageOf(target)
		if !ok {
			t.Fatalf("service %s: the Dockerfile's build stage builds no %s", name, target)
		}
		if _, dup := bins[target]; !dup {
			pkgs = append(pkgs, pkg)
			bins[target] = filepath.Join(dir, target)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	argv := append(niced("go"), append([]string{"build", "-trimpath", "-o", dir + string(os.PathSeparator)}, pkgs...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	return bins
}

// waitProfile asks the audiences profile API (with its bearer token) for a user's profile
// until it answers 200 (404 until the user's first event is processed, 503 while the owning
// partition is restored), and returns that body, or the last answer and false after timeout.
func waitProfile(baseURL, token, user string, timeout time.Duration) (string, bool) {
	client := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for {
		req, err := http.NewRequest(http.MethodGet, baseURL+"/v1/profiles/"+url.PathEscape(user), nil)
		if err != nil {
			return err.Error(), false
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(body), true
			}
			last = resp.Status + ": " + strings.TrimSpace(string(body))
		}
		if time.Now().After(deadline) {
			return last, false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// handedOut are the ports freePort returned: each is closed again until its service binds it,
// so the kernel may offer it twice; a port is never handed out twice.
var handedOut sync.Map

// freePort returns a loopback port nothing listens on, and that it never returned before.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if _, taken := handedOut.LoadOrStore(port, true); !taken {
			return port
		}
	}
	t.Fatal("no free port that was not handed out already")
	return 0
}

func randomHex(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// syncedBuffer is a bytes.Buffer safe for a process's writes and the test's reads.
type syncedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.buf.Bytes())
}
