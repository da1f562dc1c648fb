package deploytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// helmTools are the binaries built from deploy/helm/tools: helm, and kubecheck.
type helmTools struct{ helm, kubecheck string }

// buildHelmTools builds Helm (the version pinned in deploy/helm/tools/go.mod) and kubecheck
// into <repo>/.cache/helm-tools/<hash>/, once per content of that module (go.mod, go.sum, Go
// files) and Go version: the first build compiles Kubernetes' client libraries (minutes on
// two cores), later runs reuse it. The module is outside go.work (GOWORK=off), so the services' builds never see
// Kubernetes. Parallel test runs queue on a lock file.
func buildHelmTools(t *testing.T, root string) helmTools {
	t.Helper()
	mod := filepath.Join(root, "deploy/helm/tools")
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	err := filepath.WalkDir(mod, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b := filepath.Base(p); b != "go.mod" && b != "go.sum" && !strings.HasSuffix(b, ".go") {
			return nil // documentation does not change the binaries
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", strings.TrimPrefix(p, mod), len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(root, ".cache", "helm-tools")
	dir := filepath.Join(cache, hex.EncodeToString(h.Sum(nil))[:16])
	tools := helmTools{helm: filepath.Join(dir, "helm"), kubecheck: filepath.Join(dir, "kubecheck")}
	built := func() bool {
		_, err1 := os.Stat(tools.helm)
		_, err2 := os.Stat(tools.kubecheck)
		return err1 == nil && err2 == nil
	}
	if built() {
		return tools
	}
	if testing.Short() {
		t.Skip("SKIPPING the Helm chart test in -short mode: Helm is not built yet (" + dir + ")")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if built() {
		return tools
	}

	goEnv := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	// Helm's own release build stamps its version and the Kubernetes version it targets (the
	// one of its client libraries): helm template and helm lint default to that version.
	out, err := runIn(mod, goEnv, "go", "list", "-m", "-f", "{{.Version}}", "helm.sh/helm/v3", "k8s.io/client-go")
	if err != nil {
		t.Fatalf("go list -m in %s: %v\n%s", mod, err, out)
	}
	vs := strings.Fields(out)
	if len(vs) != 2 {
		t.Fatalf("go list -m: want the versions of helm and client-go, got %q", out)
	}
	helmVersion, clientGo := vs[0], strings.Split(strings.TrimPrefix(vs[1], "v"), ".")
	k8sMinor := clientGo[1] // client-go v0.N.x is Kubernetes 1.N
	ldflags := strings.Join([]string{
		"-s", "-w",
		"-X helm.sh/helm/v3/internal/version.version=" + helmVersion,
		"-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1",
		"-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=" + k8sMinor,
		"-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1",
		"-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=" + k8sMinor,
	}, " ")
	tmp, err := os.MkdirTemp(cache, "build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	t.Logf("building Helm %s and kubecheck into %s (the first time takes minutes)", helmVersion, dir)
	build := append(niced("go"), "build", "-trimpath", "-ldflags", ldflags, "-o", tmp+string(os.PathSeparator),
		"helm.sh/helm/v3/cmd/helm", "./cmd/kubecheck")
	out, err = runIn(mod, goEnv, build[0], build[1:]...)
	if err != nil {
		t.Fatalf("building Helm and kubecheck: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("built Helm %s (Kubernetes 1.%s) and kubecheck in %s", helmVersion, k8sMinor, time.Since(start).Round(time.Second))
	// Older builds of the tools are of no further use.
	if old, _ := filepath.Glob(filepath.Join(cache, "*")); len(old) > 0 {
		for _, o := range old {
			if o != dir && !strings.HasSuffix(o, ".lock") {
				os.RemoveAll(o)
			}
		}
	}
	return tools
}

func runIn(dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

// rendered is the output of helm template and kubecheck's list of its objects.
type rendered struct {
	yaml    string
	objects []struct{ Kind, Name string }
}

func (r rendered) count(kind string) int {
	n := 0
	for _, o := range r.objects {
		if o.Kind == kind {
			n++
		}
	}
	return n
}

func (r rendered) has(kind, name string) bool {
	return slices.ContainsFunc(r.objects, func(o struct{ Kind, Name string }) bool { return o.Kind == kind && o.Name == name })
}

// externalSecrets are the Secrets that ci/external-kafka-values.yaml names and the user creates.
const externalSecrets = "tributary-kafka-credentials,kafka-ca,tributary-config-key,tributary-audiences-token,tributary-console-token"

// consoleToken is the console.token the tests render with: the chart refuses to render the
// console without a token (or an existing Secret holding one).
var consoleToken = []string{"--set", "console.token=test-console-token"}

// TestHelmChart lints and renders deploy/helm/tributary and checks every object strictly.
func TestHelmChart(t *testing.T) {
	root := repoRoot(t)
	tools := buildHelmTools(t, root)
	chart := filepath.Join(root, "deploy/helm/tributary")
	external := filepath.Join(chart, "ci/external-kafka-values.yaml")
	helm := func(args ...string) (string, error) {
		return runIn(root, append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir()),
			tools.helm, args...)
	}
	render := func(t *testing.T, externalNames string, args ...string) rendered {
		t.Helper()
		out, err := helm(append([]string{"template", "tr", chart, "--namespace", "tributary"}, args...)...)
		if err != nil {
			t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		cmd := exec.Command(tools.kubecheck, "-external", externalNames)
		cmd.Stdin = strings.NewReader(out)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubecheck (helm template %s): %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		var r rendered
		var list struct {
			Objects []struct{ Kind, Name string } `json:"objects"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
			t.Fatalf("kubecheck output: %v: %s", err, stdout.String())
		}
		r.yaml, r.objects = out, list.Objects
		return r
	}

	t.Run("lint", func(t *testing.T) {
		for _, args := range [][]string{consoleToken, {"--values", external}} {
			out, err := helm(append([]string{"lint", "--strict", chart}, args...)...)
			if err != nil {
				t.Errorf("helm lint --strict %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})

	t.Run("default-values", func(t *testing.T) {
		r := render(t, "", consoleToken...)
		for _, want := range []struct{ kind, name string }{
			{"Deployment", "tr-tributary-ingest"},
			{"Deployment", "tr-tributary-console"},
			{"StatefulSet", "tr-tributary-router"},
			{"StatefulSet", "tr-tributary-deliverer"},
			{"StatefulSet", "tr-tributary-audiences"},
			{"Job", "tr-tributary-init-1"},
			{"Service", "tr-tributary-ingest"},
			{"Service", "tr-tributary-router"},
			{"Service", "tr-tributary-deliverer"},
			{"Service", "tr-tributary-audiences"},
			{"Service", "tr-tributary-audiences-api"},
			{"Service", "tr-tributary-console"},
			{"Secret", "tr-tributary-secrets"},
			{"Secret", "tr-tributary-audiences-token"},
			{"ConfigMap", "tr-tributary-env"},
			{"ServiceAccount", "tr-tributary"},
			{"PodDisruptionBudget", "tr-tributary-router"},
			{"PodDisruptionBudget", "tr-tributary-audiences"},
		} {
			if !r.has(want.kind, want.name) {
				t.Errorf("default values: no %s %s among %v", want.kind, want.name, r.objects)
			}
		}
		for kind, n := range map[string]int{"HorizontalPodAutoscaler": 0, "Ingress": 0, "ServiceMonitor": 0, "Secret": 2, "PodDisruptionBudget": 4, "NetworkPolicy": 5} {
			if got := r.count(kind); got != n {
				t.Errorf("default values: %d %s, want %d", got, kind, n)
			}
		}
		checkAudiences(t, r.yaml, "tributary", "tr-tributary-audiences-token/token")
		// Ingest rolls without losing capacity.
		if s := findManifest(t, decodeManifests(t, r.yaml), "Deployment", "tr-tributary-ingest").Spec.Strategy; s.Type != "RollingUpdate" || s.RollingUpdate["maxUnavailable"] != 0 {
			t.Errorf("ingest Deployment: strategy %+v, want RollingUpdate with maxUnavailable 0", s)
		}
		checkConsole(t, r.yaml, "tr-tributary-secrets", "console-token", map[string]string{
			"CONSOLE_INGEST_URL":    "http://tr-tributary-ingest:8080",
			"CONSOLE_AUDIENCES_URL": "http://tr-tributary-audiences-api:8091",
			"AUDIENCES_TOKEN":       "secret:tr-tributary-audiences-token/token",
		})
		// console.ingestURL, when set, is the URL the UI shows (over ingest.publicURL).
		custom := render(t, "", append([]string{"--set", "console.ingestURL=https://collect.example.com", "--set", "ingest.publicURL=https://track.example.com"}, consoleToken...)...)
		checkConsole(t, custom.yaml, "tr-tributary-secrets", "console-token", map[string]string{
			"CONSOLE_INGEST_URL":    "https://collect.example.com",
			"CONSOLE_AUDIENCES_URL": "http://tr-tributary-audiences-api:8091",
			"AUDIENCES_TOKEN":       "secret:tr-tributary-audiences-token/token",
		})
		if got := secretData(t, r.yaml, "tr-tributary-secrets"); len(got) != 1 || got["console-token"] != "test-console-token" {
			t.Errorf("Secret tr-tributary-secrets: stringData %v, want only console-token: test-console-token", got)
		}
		// The console's Ingress, by default, routes its host's "/": the UI and the API.
		ing := render(t, "", append([]string{"--set", "console.ingress.enabled=true"}, consoleToken...)...)
		if got := ing.count("Ingress"); got != 1 {
			t.Errorf("console.ingress.enabled=true: %d Ingresses, want 1", got)
		}
		checkIngress(t, ing.yaml, "tr-tributary-console", "console.tributary.example.com", "/", "")
		// More than one console (docs/operations.md#two-consoles): the replicas asked for, rolled
		// one at a time, wired as one.
		two := render(t, "", append([]string{"--set", "console.replicas=2"}, consoleToken...)...)
		if d := findManifest(t, decodeManifests(t, two.yaml), "Deployment", "tr-tributary-console"); d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("console.replicas=2: console Deployment replicas %v, want 2", d.Spec.Replicas)
		}
		checkConsole(t, two.yaml, "tr-tributary-secrets", "console-token", map[string]string{
			"CONSOLE_INGEST_URL":    "http://tr-tributary-ingest:8080",
			"CONSOLE_AUDIENCES_URL": "http://tr-tributary-audiences-api:8091",
			"AUDIENCES_TOKEN":       "secret:tr-tributary-audiences-token/token",
		})
		// A new console.token rolls the console's pods (the Secret's checksum in their template).
		again := render(t, "", "--set", "console.token=another-console-token")
		if a, b := podAnnotation(t, r.yaml, "Deployment", "tr-tributary-console", "checksum/secret"), podAnnotation(t, again.yaml, "Deployment", "tr-tributary-console", "checksum/secret"); a == "" || a == b {
			t.Errorf("console pod annotation checksum/secret %q with one token, %q with another: want a checksum that changes", a, b)
		}
	})

	t.Run("console-disabled", func(t *testing.T) {
		// No token is needed then, and no Secret is rendered for it (only the profile API's);
		// its other values (replicas) are not checked.
		r := render(t, "", "--set", "console.enabled=false", "--set", "console.ingress.enabled=true", "--set", "console.replicas=2")
		for _, o := range r.objects {
			if strings.Contains(o.Name, "console") || (o.Kind == "Secret" && o.Name != "tr-tributary-audiences-token") {
				t.Errorf("console.enabled=false: %s %s rendered", o.Kind, o.Name)
			}
		}
		if got := r.count("Deployment"); got != 1 {
			t.Errorf("console.enabled=false: %d Deployments, want 1 (ingest)", got)
		}
	})

	t.Run("audiences-disabled", func(t *testing.T) {
		r := render(t, "", append([]string{"--set", "audiences.enabled=false"}, consoleToken...)...)
		for _, o := range r.objects {
			if strings.Contains(o.Name, "audiences") {
				t.Errorf("audiences.enabled=false: %s %s rendered", o.Kind, o.Name)
			}
		}
		if got := r.count("StatefulSet"); got != 2 {
			t.Errorf("audiences.enabled=false: %d StatefulSets, want 2 (router, deliverer)", got)
		}
		// The console is not pointed at an audiences service that does not exist, nor given
		// its token.
		checkConsole(t, r.yaml, "tr-tributary-secrets", "console-token", map[string]string{
			"CONSOLE_INGEST_URL": "http://tr-tributary-ingest:8080",
		})
		r = render(t, "tributary-audiences-token", append([]string{"--set", "audiences.enabled=false", "--set", "audiences.token.existingSecret=tributary-audiences-token"}, consoleToken...)...)
		checkConsole(t, r.yaml, "tr-tributary-secrets", "console-token", map[string]string{
			"CONSOLE_INGEST_URL": "http://tr-tributary-ingest:8080",
		})
	})

	t.Run("servicemonitor-when-the-api-exists", func(t *testing.T) {
		r := render(t, "", append([]string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"}, consoleToken...)...)
		if got := r.count("ServiceMonitor"); got != 5 {
			t.Errorf("%d ServiceMonitors, want 5 (ingest, router, deliverer, audiences, console)", got)
		}
		checkServiceMonitorsSelectOneService(t, r.yaml)
		// Ingest's and the console's metrics are off their public port: the ServiceMonitor
		// scrapes the metrics port, which the pod serves on METRICS_ADDR and the Service exposes.
		doc := func(kind, name string) string {
			for _, d := range strings.Split(r.yaml, "\n---") {
				if strings.Contains(d, "kind: "+kind+"\n") && strings.Contains(d, "name: "+name+"\n") {
					return d
				}
			}
			t.Fatalf("no %s %s in the rendered chart", kind, name)
			return ""
		}
		if d := doc("ServiceMonitor", "tr-tributary-ingest"); !strings.Contains(d, "port: metrics") {
			t.Errorf("ingest's ServiceMonitor does not scrape the metrics port:\n%s", d)
		}
		if d := doc("ServiceMonitor", "tr-tributary-router"); !strings.Contains(d, "port: http") {
			t.Errorf("the router's ServiceMonitor should scrape its http (metrics) port:\n%s", d)
		}
		if d := doc("ServiceMonitor", "tr-tributary-audiences"); !strings.Contains(d, "port: http") {
			t.Errorf("the audiences ServiceMonitor should scrape its http (API and metrics) port:\n%s", d)
		}
		if d := doc("ServiceMonitor", "tr-tributary-console"); !strings.Contains(d, "port: metrics") || strings.Contains(d, "port: http") {
			t.Errorf("the console's ServiceMonitor should scrape its metrics port (METRICS_ADDR), not the http port of the UI and API:\n%s", d)
		}
		if d := doc("Deployment", "tr-tributary-ingest"); !strings.Contains(d, "name: METRICS_ADDR") || !strings.Contains(d, `value: "0.0.0.0:9100"`) || !strings.Contains(d, "containerPort: 9100") {
			t.Errorf("ingest's Deployment does not serve METRICS_ADDR on 9100:\n%s", d)
		}
		if d := doc("Service", "tr-tributary-ingest"); !strings.Contains(d, "targetPort: metrics") {
			t.Errorf("ingest's Service does not expose the metrics port:\n%s", d)
		}
	})

	t.Run("external-kafka-sasl-tls-ingress-autoscaling", func(t *testing.T) {
		r := render(t, externalSecrets, "--values", external,
			"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule",
			"--set", "prometheusRule.enabled=true")
		for kind, n := range map[string]int{"HorizontalPodAutoscaler": 3, "Ingress": 2, "ServiceMonitor": 5, "Secret": 1, "Deployment": 3, "StatefulSet": 3, "PrometheusRule": 1, "PodDisruptionBudget": 4, "NetworkPolicy": 5} {
			if got := r.count(kind); got != n {
				t.Errorf("%d %s, want %d", got, kind, n)
			}
		}
		env := workloadEnv(t, r.yaml)
		for _, c := range []string{"init", "ingest", "router", "deliverer", "audiences", "console"} {
			for _, k := range []string{"KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_BROKERS", "KAFKA_SASL_MECHANISM", "KAFKA_TLS", "KAFKA_TLS_CA_FILE", "KAFKA_PARTITIONS", "CONFIG_ENCRYPTION_KEY"} {
				if !env[c][k] {
					t.Errorf("%s does not get %s", c, k)
				}
			}
		}
		for c, k := range map[string]string{"router": "ROUTER_TRANSACTIONAL_ID", "deliverer": "DELIVERER_INSTANCE_ID", "init": "CONFIG_FILE", "ingest": "INGEST_PUBLIC_URL", "audiences": "AUDIENCES_TOKEN"} {
			if !env[c][k] {
				t.Errorf("%s does not get %s", c, k)
			}
		}
		checkAudiences(t, r.yaml, "tributary", "tributary-audiences-token/api-token")
		// CONSOLE_INGEST_URL from ingest.publicURL (no console.ingestURL), the audiences API's
		// Service on its port 80, with the audiences service's token.
		checkConsole(t, r.yaml, "tributary-console-token", "admin-token", map[string]string{
			"CONSOLE_INGEST_URL":    "https://track.example.com",
			"CONSOLE_AUDIENCES_URL": "http://tr-tributary-audiences-api:80",
			"AUDIENCES_TOKEN":       "secret:tributary-audiences-token/api-token",
		})
		if got := secretData(t, r.yaml, "tr-tributary-secrets"); got["console-token"] != "" {
			t.Error("console.existingSecret is set, yet the chart's Secret holds a console-token")
		}
		if a := podAnnotation(t, r.yaml, "Deployment", "tr-tributary-console", "checksum/secret"); a != "" {
			t.Errorf("console pods carry checksum/secret %q while their token is in an existing Secret", a)
		}
		checkIngress(t, r.yaml, "tr-tributary-ingest", "track.example.com", "/v1", "track-example-com-tls")
		checkIngress(t, r.yaml, "tr-tributary-console", "console.example.com", "/", "console-example-com-tls")
		checkServiceMonitorsSelectOneService(t, r.yaml)
		for _, alert := range []string{"TributaryDeadLetters", "TributaryDeliverySuccessLow", "TributaryConsumerLagGrowing", "TributaryNotReady", "TributaryIngestRefusing"} {
			if !strings.Contains(r.yaml, "alert: "+alert) {
				t.Errorf("the PrometheusRule has no %s (files/alerts.yaml)", alert)
			}
		}
		if !strings.Contains(r.yaml, "url: http://tr-tributary-receiver:9000/webhook") {
			t.Error("the tenant config's template ({{ include \"tributary.fullname\" . }}) was not rendered")
		}
	})

	t.Run("audiences-token", func(t *testing.T) {
		// The profile API always asks for a token (AUDIENCES_TOKEN is required): by default the
		// chart generates one into <fullname>-audiences-token, once per render (the Secret, the
		// audiences pods and the console agree), and kept across upgrades by lookup (which
		// helm template cannot show: each render is an install). A change rolls both workloads.
		r := render(t, "", consoleToken...)
		token := secretData(t, r.yaml, "tr-tributary-audiences-token")["token"]
		if len(token) != 48 {
			t.Fatalf("Secret tr-tributary-audiences-token: token %q, want 48 generated characters", token)
		}
		sum := fmt.Sprintf("%x", sha256.Sum256([]byte(token)))
		for kind, name := range map[string]string{"StatefulSet": "tr-tributary-audiences", "Deployment": "tr-tributary-console"} {
			if got := podAnnotation(t, r.yaml, kind, name, "checksum/audiences-token"); got != sum {
				t.Errorf("%s %s: checksum/audiences-token %q, want the sha256 of the Secret's token %s", kind, name, got, sum)
			}
		}
		if again := secretData(t, render(t, "", consoleToken...).yaml, "tr-tributary-audiences-token")["token"]; again == token {
			t.Errorf("two installs generated the same token %q", token)
		}
		// audiences.token.value is stored as it is.
		r = render(t, "", append([]string{"--set", "audiences.token.value=my-own-profile-api-token"}, consoleToken...)...)
		if got := secretData(t, r.yaml, "tr-tributary-audiences-token")["token"]; got != "my-own-profile-api-token" {
			t.Errorf("audiences.token.value: the Secret holds %q", got)
		}
		checkAudiences(t, r.yaml, "tributary", "tr-tributary-audiences-token/token")
		// An existing Secret: the chart renders none and puts no checksum on the pods.
		r = render(t, "my-token", append([]string{"--set", "audiences.token.existingSecret=my-token", "--set", "audiences.token.secretKey=k"}, consoleToken...)...)
		if r.has("Secret", "tr-tributary-audiences-token") {
			t.Error("audiences.token.existingSecret: the chart still renders tr-tributary-audiences-token")
		}
		checkAudiences(t, r.yaml, "tributary", "my-token/k")
		checkConsole(t, r.yaml, "tr-tributary-secrets", "console-token", map[string]string{
			"CONSOLE_INGEST_URL":    "http://tr-tributary-ingest:8080",
			"CONSOLE_AUDIENCES_URL": "http://tr-tributary-audiences-api:8091",
			"AUDIENCES_TOKEN":       "secret:my-token/k",
		})
		if a := podAnnotation(t, r.yaml, "StatefulSet", "tr-tributary-audiences", "checksum/audiences-token"); a != "" {
			t.Errorf("audiences pods carry checksum/audiences-token %q while the token is in an existing Secret", a)
		}
	})

	t.Run("operator-webhook", func(t *testing.T) {
		// Auto-disable notices go to deliverer.operatorWebhook.url, signed with the value of an
		// existing Secret; by default neither variable is set (notices to the log, the console
		// and tributary.notices only).
		env := containerEnv(t, render(t, "", consoleToken...).yaml, "StatefulSet", "tr-tributary-deliverer")
		for _, name := range []string{"OPERATOR_WEBHOOK_URL", "OPERATOR_WEBHOOK_SECRET"} {
			if v, ok := env[name]; ok {
				t.Errorf("default values: the deliverer gets %s=%q", name, v)
			}
		}
		r := render(t, "ops-hook", append([]string{"--set", "deliverer.operatorWebhook.url=https://ops.example.com/tributary",
			"--set", "deliverer.operatorWebhook.existingSecret=ops-hook", "--set", "deliverer.operatorWebhook.secretKey=s"}, consoleToken...)...)
		env = containerEnv(t, r.yaml, "StatefulSet", "tr-tributary-deliverer")
		if env["OPERATOR_WEBHOOK_URL"] != "https://ops.example.com/tributary" || env["OPERATOR_WEBHOOK_SECRET"] != "secret:ops-hook/s" {
			t.Errorf("deliverer env: OPERATOR_WEBHOOK_URL %q, OPERATOR_WEBHOOK_SECRET %q; want the URL and secret:ops-hook/s",
				env["OPERATOR_WEBHOOK_URL"], env["OPERATOR_WEBHOOK_SECRET"])
		}
	})

	t.Run("console-oidc", func(t *testing.T) {
		// Single sign-on (console.oidc, docs/console.md#single-sign-on): off by default (no
		// CONSOLE_OIDC_* variable); with an issuer, its settings, and the client secret from the
		// user's Secret; an issuer without a client id is refused.
		env := containerEnv(t, render(t, "", consoleToken...).yaml, "Deployment", "tr-tributary-console")
		for name, v := range env {
			if strings.HasPrefix(name, "CONSOLE_OIDC_") {
				t.Errorf("default values: the console gets %s=%q", name, v)
			}
		}
		r := render(t, "sso-client", append([]string{"--set", "console.oidc.issuer=https://sso.example.com/realms/acme",
			"--set", "console.oidc.clientId=tributary-console", "--set", "console.oidc.existingSecret=sso-client",
			"--set", "console.oidc.roles=admin=platform-admins;viewer=*", "--set", "console.oidc.piiGroups={support,privacy}",
			"--set", "console.oidc.redirectURL=https://console.example.com/oidc/callback"}, consoleToken...)...)
		env = containerEnv(t, r.yaml, "Deployment", "tr-tributary-console")
		for name, want := range map[string]string{
			"CONSOLE_OIDC_ISSUER":        "https://sso.example.com/realms/acme",
			"CONSOLE_OIDC_CLIENT_ID":     "tributary-console",
			"CONSOLE_OIDC_CLIENT_SECRET": "secret:sso-client/client-secret",
			"CONSOLE_OIDC_REDIRECT_URL":  "https://console.example.com/oidc/callback",
			"CONSOLE_OIDC_SCOPES":        "openid email profile",
			"CONSOLE_OIDC_GROUPS_CLAIM":  "groups",
			"CONSOLE_OIDC_ROLES":         "admin=platform-admins;viewer=*",
			"CONSOLE_OIDC_PII_GROUPS":    "support,privacy",
		} {
			if env[name] != want {
				t.Errorf("console env %s = %q, want %q", name, env[name], want)
			}
		}
		out, err := helm(append(append([]string{"template", "tr", chart}, consoleToken...), "--set", "console.oidc.issuer=https://sso.example.com")...)
		if err == nil || !strings.Contains(out, "console.oidc.clientId is required with console.oidc.issuer") {
			t.Errorf("an issuer without a client id: want a failure naming console.oidc.clientId, got %v\n%s", err, tail([]byte(out), 5))
		}
	})

	t.Run("allowed-hosts", func(t *testing.T) {
		// The console answers its Service's names, its Ingress hosts and console.allowedHosts
		// (docs/security.md#dns-rebinding); "*" turns the check off. Ingest answers any name
		// unless ingest.allowedHosts is set.
		svc := "tr-tributary-console,tr-tributary-console.tributary,tr-tributary-console.tributary.svc,tr-tributary-console.tributary.svc.cluster.local"
		for _, c := range []struct {
			args []string
			want string
		}{
			{nil, svc},
			{[]string{"--set", "console.ingress.enabled=true", "--set", "console.allowedHosts={admin.example.com}", "--set", "clusterDomain=k8s.example"},
				strings.ReplaceAll(svc, "cluster.local", "k8s.example") + ",console.tributary.example.com,admin.example.com"},
			{[]string{"--set", "console.allowedHosts={*}"}, "*"},
		} {
			r := render(t, "", append(c.args, consoleToken...)...)
			if got := containerEnv(t, r.yaml, "Deployment", "tr-tributary-console")["CONSOLE_ALLOWED_HOSTS"]; got != c.want {
				t.Errorf("%s: CONSOLE_ALLOWED_HOSTS %q, want %q", strings.Join(c.args, " "), got, c.want)
			}
		}
		r := render(t, "", consoleToken...)
		if got, ok := containerEnv(t, r.yaml, "Deployment", "tr-tributary-ingest")["INGEST_ALLOWED_HOSTS"]; ok {
			t.Errorf("default values: INGEST_ALLOWED_HOSTS %q, want it unset (any name)", got)
		}
		r = render(t, "", append([]string{"--set", "ingest.allowedHosts={track.example.com}", "--set", "ingress.enabled=true"}, consoleToken...)...)
		want := "tr-tributary-ingest,tr-tributary-ingest.tributary,tr-tributary-ingest.tributary.svc,tr-tributary-ingest.tributary.svc.cluster.local,tributary.example.com,track.example.com"
		if got := containerEnv(t, r.yaml, "Deployment", "tr-tributary-ingest")["INGEST_ALLOWED_HOSTS"]; got != want {
			t.Errorf("ingest.allowedHosts: INGEST_ALLOWED_HOSTS %q, want %q", got, want)
		}
		r = render(t, "", append([]string{"--set", "audiences.allowedHosts={*}"}, consoleToken...)...)
		if got := containerEnv(t, r.yaml, "StatefulSet", "tr-tributary-audiences")["AUDIENCES_ALLOWED_HOSTS"]; got != "*" {
			t.Errorf("audiences.allowedHosts={*}: AUDIENCES_ALLOWED_HOSTS %q, want *", got)
		}
	})

	t.Run("network-policies", func(t *testing.T) {
		// Each component's pods accept only what they serve: the profile API the console and
		// the audiences replicas, the metrics ports networkPolicy.metricsFrom (the namespace
		// "monitoring" by default), the tracking API and (by default) the console's UI anyone.
		monitoring := "ns:kubernetes.io/metadata.name=monitoring"
		audiences := "pods:app.kubernetes.io/component=audiences,app.kubernetes.io/instance=tr,app.kubernetes.io/name=tributary"
		console := "pods:app.kubernetes.io/component=console,app.kubernetes.io/instance=tr,app.kubernetes.io/name=tributary"
		r := render(t, "", consoleToken...)
		got := networkPolicies(t, r.yaml)
		want := map[string][]string{
			"ingest":    {"http from any", "metrics from " + monitoring},
			"router":    {"http from " + monitoring},
			"deliverer": {"http from " + monitoring},
			"audiences": {"http from " + audiences + " " + console, "http from " + monitoring},
			"console":   {"http from any", "metrics from " + monitoring},
		}
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("NetworkPolicies (component: ingress rules):\n got %v\nwant %v", got, want)
		}
		// Your Ingress controller for the console, your own clients of the profile API, and
		// metricsFrom [] for any scraper.
		r = render(t, "", append([]string{"--set-json", `networkPolicy.consoleFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ingress-nginx"}}}]`,
			"--set-json", `networkPolicy.audiencesFrom=[{"namespaceSelector":{"matchLabels":{"team":"crm"}}}]`,
			"--set-json", "networkPolicy.metricsFrom=[]"}, consoleToken...)...)
		got = networkPolicies(t, r.yaml)
		want = map[string][]string{
			"ingest":    {"http from any", "metrics from any"},
			"router":    {"http from any"},
			"deliverer": {"http from any"},
			"audiences": {"http from " + audiences + " " + console + " ns:team=crm", "http from any"},
			"console":   {"http from ns:kubernetes.io/metadata.name=ingress-nginx", "metrics from any"},
		}
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("NetworkPolicies with consoleFrom, audiencesFrom and metricsFrom []:\n got %v\nwant %v", got, want)
		}
		// Without the console the profile API is the replicas' alone; networkPolicy.enabled=false
		// renders none.
		got = networkPolicies(t, render(t, "", "--set", "console.enabled=false").yaml)
		if a := got["audiences"]; len(a) != 2 || a[0] != "http from "+audiences {
			t.Errorf("console.enabled=false: audiences rules %v, want the replicas only on http", a)
		}
		if n := render(t, "", append([]string{"--set", "networkPolicy.enabled=false"}, consoleToken...)...).count("NetworkPolicy"); n != 0 {
			t.Errorf("networkPolicy.enabled=false: %d NetworkPolicies", n)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--set", "router.autoscaling.enabled=true", "--set", "router.autoscaling.maxReplicas=7"}, "router.autoscaling.maxReplicas (7) exceeds kafka.partitions (6)"},
			{[]string{"--set", "deliverer.replicas=7"}, "deliverer.replicas (7) exceeds kafka.partitions (6)"},
			{[]string{"--set", "audiences.replicas=7"}, "audiences.replicas (7) exceeds kafka.partitions (6)"},
			{[]string{"--set", "audiences.autoscaling.enabled=true", "--set", "audiences.autoscaling.maxReplicas=7"}, "audiences.autoscaling.maxReplicas (7) exceeds kafka.partitions (6)"},
			{[]string{"--set", "kafka.partitions=1", "--set", "router.replicas=2"}, "router.replicas (2) exceeds kafka.partitions (1)"},
			{[]string{"--set", "kafka.sasl.mechanism=SCRAM-SHA-512"}, "username and password (or existingSecret) are required"},
			{[]string{"--set", "kafka.brokers=null"}, "kafka.brokers is required"},
			{[]string{"--set", "kafka.tls.caSecret=ca"}, "kafka.tls.caSecret needs kafka.tls.enabled"},
			{[]string{"--set", "console.token="}, "console.token or console.existingSecret is required"},
			{[]string{"--set", "console.token=short"}, "console.token must be at least 16 characters (CONSOLE_TOKEN), got 5"},
			{[]string{"--set", "audiences.token.value=short-token"}, "audiences.token.value must be at least 16 characters (AUDIENCES_TOKEN), got 11"},
			// Any fixed number of consoles (docs/operations.md#two-consoles).
			{[]string{"--set", "console.replicas=0"}, "console.replicas must be at least 1 (console.enabled=false renders no console)"},
			{[]string{"--set", "console.autoscaling.enabled=true"}, "console.autoscaling is not supported: set console.replicas (2 or more for a console that stays up through a pod's restart, docs/operations.md#two-consoles)"},
			{[]string{"--set", "console.autoscaling.enabled=true", "--set", "console.autoscaling.minReplicas=1", "--set", "console.autoscaling.maxReplicas=1"}, "console.autoscaling is not supported"},
		} {
			// consoleToken first: a case's own --set console.token= overrides it.
			out, err := helm(append(append([]string{"template", "tr", chart}, consoleToken...), c.args...)...)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("helm template %s: want a failure saying %q, got %v\n%s", strings.Join(c.args, " "), c.want, err, tail([]byte(out), 5))
			}
		}
	})

	t.Run("notes", func(t *testing.T) {
		// helm template does not render NOTES.txt: render a copy of the chart in which NOTES.txt
		// is a named template, included into a ConfigMap.
		copyDir := t.TempDir()
		notes := copyChartWithNotes(t, chart, copyDir)
		for _, c := range []struct {
			args         []string
			want, absent []string
		}{
			{consoleToken, []string{"kubectl -n tributary port-forward service/tr-tributary-ingest 8080:8080", "No tenant config was given", "logs job/tr-tributary-init-1",
				"port-forward service/tr-tributary-audiences-api 8091:8091", "http://tr-tributary-audiences-api.tributary.svc:8091",
				"bearer token is in Secret tr-tributary-audiences-token, key token", `curl -H "Authorization: Bearer $AUDIENCES_TOKEN" http://127.0.0.1:8091/v1/profiles/<userId>`,
				"NetworkPolicies limit who reaches each component",
				"port-forward service/tr-tributary-console 8090:8090", `curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8090/v1/sources`, "kubectl -n tributary get secret tr-tributary-secrets -o jsonpath='{.data.console-token}' | base64 -d",
				"http://tr-tributary-console.tributary.svc:8090", "open http://127.0.0.1:8090/ in a browser (the UI) and sign in with $TOKEN", "set console.ingestURL",
				`Metrics: /metrics on port "metrics" of ingest's and the console's Services, on port "http" of the others.`}, nil},
			{[]string{"--values", external}, []string{"https://track.example.com/v1/track", "(SASL SCRAM-SHA-512) (TLS)", "http://tr-tributary-receiver:9000/webhook",
				"port-forward service/tr-tributary-audiences-api 8091:80", "bearer token is in Secret tributary-audiences-token, key api-token",
				`curl -H "Authorization: Bearer $TOKEN" https://console.example.com/v1/sources`, "get secret tributary-console-token -o jsonpath='{.data.admin-token}'",
				"open https://console.example.com/ in a browser (the UI) and sign in with $TOKEN"}, []string{"set console.ingestURL", "port-forward service/tr-tributary-console"}},
			{[]string{"--set", "console.enabled=false"}, []string{`Metrics: /metrics on port "metrics" of ingest's Service, on port "http" of the others.`}, []string{"console"}},
		} {
			out, err := helm(append([]string{"template", "tr", copyDir, "--namespace", "tributary", "--show-only", notes}, c.args...)...)
			if err != nil {
				t.Fatalf("rendering NOTES.txt %s: %v\n%s", strings.Join(c.args, " "), err, out)
			}
			var cm struct {
				Data struct {
					Notes string `yaml:"notes"`
				} `yaml:"data"`
			}
			if err := yaml.Unmarshal([]byte(out), &cm); err != nil {
				t.Fatalf("NOTES.txt wrapper: %v\n%s", err, out)
			}
			for _, w := range c.want {
				if !strings.Contains(cm.Data.Notes, w) {
					t.Errorf("NOTES.txt %s: no %q in\n%s", strings.Join(c.args, " "), w, cm.Data.Notes)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(cm.Data.Notes, a) {
					t.Errorf("NOTES.txt %s: %q in\n%s", strings.Join(c.args, " "), a, cm.Data.Notes)
				}
			}
		}
	})

	t.Run("env-names", func(t *testing.T) {
		// Every variable the chart sets is read by the code of the component that gets it.
		df := parseDockerfile(t, filepath.Join(root, "deploy/docker/Dockerfile"))
		r := render(t, externalSecrets, "--values", external)
		for c, names := range workloadEnv(t, r.yaml) {
			target := c
			if c == "init" {
				target = "tributary-init"
			}
			pkg, ok := df.packageOf(target)
			if !ok {
				t.Fatalf("component %s: the Dockerfile builds no %s", c, target)
			}
			known := envNamesInCode(t, sourceDirs(root, pkg)...)
			for k := range names {
				if !known[k] && !sharedSetting[k] {
					t.Errorf("component %s gets %s, which its code does not read", c, k)
				}
			}
		}
	})
}

// sharedSetting are the variables of the common ConfigMap that only some components read
// (all of them get it, as with the shared block of docker-compose.yml).
var sharedSetting = map[string]bool{"RETRY_SCHEDULE": true, "RETRY_WINDOW": true, "DELIVERY_TIMEOUT": true}

// workloadEnv returns, per component (app.kubernetes.io/component), the names of the
// variables its containers get: env entries and the keys of envFrom ConfigMaps.
func workloadEnv(t *testing.T, manifests string) map[string]map[string]bool {
	t.Helper()
	type container struct {
		Env []struct {
			Name string `yaml:"name"`
		} `yaml:"env"`
		EnvFrom []struct {
			ConfigMapRef *struct {
				Name string `yaml:"name"`
			} `yaml:"configMapRef"`
		} `yaml:"envFrom"`
	}
	type object struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name   string            `yaml:"name"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []container `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var objs []object
	dec := yaml.NewDecoder(strings.NewReader(manifests))
	for {
		var o object
		err := dec.Decode(&o)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding the manifests: %v", err)
		}
		objs = append(objs, o)
	}
	configMaps := map[string]map[string]string{}
	for _, o := range objs {
		if o.Kind == "ConfigMap" {
			configMaps[o.Metadata.Name] = o.Data
		}
	}
	out := map[string]map[string]bool{}
	for _, o := range objs {
		if o.Kind != "Deployment" && o.Kind != "StatefulSet" && o.Kind != "Job" {
			continue
		}
		c := o.Metadata.Labels["app.kubernetes.io/component"]
		if out[c] == nil {
			out[c] = map[string]bool{}
		}
		for _, ct := range o.Spec.Template.Spec.Containers {
			for _, e := range ct.Env {
				out[c][e.Name] = true
			}
			for _, ef := range ct.EnvFrom {
				if ef.ConfigMapRef != nil {
					for k := range configMaps[ef.ConfigMapRef.Name] {
						out[c][k] = true
					}
				}
			}
		}
	}
	return out
}

// copyChartWithNotes copies the chart to dst with templates/NOTES.txt turned into a named
// template included by templates/notes-under-test.yaml (a ConfigMap with the text in
// data.notes), and returns that template's path for --show-only.
func copyChartWithNotes(t *testing.T, chart, dst string) string {
	t.Helper()
	err := filepath.WalkDir(chart, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(chart, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == filepath.Join("templates", "NOTES.txt") {
			target = filepath.Join(dst, "templates", "_notes-under-test.tpl")
			data = append(append([]byte(`{{- define "notes-under-test" }}`), data...), []byte("{{- end }}\n")...)
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	const wrapper = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ include \"notes-under-test\" . | toJson }}\n"
	if err := os.WriteFile(filepath.Join(dst, "templates", "notes-under-test.yaml"), []byte(wrapper), 0o644); err != nil {
		t.Fatal(err)
	}
	return "templates/notes-under-test.yaml"
}

// niced returns the command line that runs name at the lowest CPU priority when nice exists:
// the heavy builds of these tests then take only idle CPU from the timing-sensitive tests of
// other packages that `make test` runs at the same time.
func niced(name string) []string {
	if _, err := exec.LookPath("nice"); err == nil {
		return []string{"nice", "-n", "19", name}
	}
	return []string{name}
}

// manifest is the part of a rendered object that the checks below read.
type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		// Service
		ClusterIP                string    `yaml:"clusterIP"`
		PublishNotReadyAddresses bool      `yaml:"publishNotReadyAddresses"`
		Selector                 yaml.Node `yaml:"selector"` // a Service's map, a ServiceMonitor's LabelSelector
		Type                     string    `yaml:"type"`
		Ports                    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		// Deployment and StatefulSet
		Replicas    *int   `yaml:"replicas"`
		ServiceName string `yaml:"serviceName"`
		Strategy    struct {
			Type          string         `yaml:"type"`
			RollingUpdate map[string]any `yaml:"rollingUpdate"`
		} `yaml:"strategy"` // a Deployment's
		Template struct {
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []struct {
					Env []struct {
						Name      string `yaml:"name"`
						Value     string `yaml:"value"`
						ValueFrom *struct {
							FieldRef *struct {
								FieldPath string `yaml:"fieldPath"`
							} `yaml:"fieldRef"`
							SecretKeyRef *struct {
								Name string `yaml:"name"`
								Key  string `yaml:"key"`
							} `yaml:"secretKeyRef"`
						} `yaml:"valueFrom"`
					} `yaml:"env"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					ReadinessProbe probe `yaml:"readinessProbe"`
					LivenessProbe  probe `yaml:"livenessProbe"`
					StartupProbe   probe `yaml:"startupProbe"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

func decodeManifests(t *testing.T, manifests string) []manifest {
	t.Helper()
	var out []manifest
	dec := yaml.NewDecoder(strings.NewReader(manifests))
	for {
		var m manifest
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding the manifests: %v", err)
		}
		if m.Kind != "" {
			out = append(out, m)
		}
	}
}

func findManifest(t *testing.T, objs []manifest, kind, name string) manifest {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendered chart", kind, name)
	return manifest{}
}

// checkAudiences checks the wiring of the audiences StatefulSet (release "tr"): its
// transactional id is the pod's name, AUDIENCES_PEER_URL reaches a pod by that name through
// the StatefulSet's headless Service (which publishes pods before they are ready: one that
// restores its partitions still answers for them), clients get a Service of their own, the
// token comes from tokenRef ("<Secret>/<key>"), and AUDIENCES_ALLOWED_HOSTS accepts the client
// Service's names and the pods' names under the headless Service (the forwarding's), and no
// other name (docs/security.md#dns-rebinding).
func checkAudiences(t *testing.T, manifests, namespace, tokenRef string) {
	t.Helper()
	objs := decodeManifests(t, manifests)
	sts := findManifest(t, objs, "StatefulSet", "tr-tributary-audiences")
	if sts.Spec.ServiceName != "tr-tributary-audiences" {
		t.Errorf("audiences StatefulSet: serviceName %q, want tr-tributary-audiences", sts.Spec.ServiceName)
	}
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("audiences StatefulSet: %d containers, want 1", len(sts.Spec.Template.Spec.Containers))
	}
	c := sts.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = "field:" + e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	want := map[string]string{
		"AUDIENCES_ADDR":             "0.0.0.0:8091",
		"AUDIENCES_TRANSACTIONAL_ID": "field:metadata.name",
		"AUDIENCES_PEER_URL":         "http://{instance}.tr-tributary-audiences." + namespace + ".svc:8091",
		"AUDIENCES_TOKEN":            "secret:" + tokenRef,
		"AUDIENCES_ALLOWED_HOSTS": strings.Join([]string{"tr-tributary-audiences-api", "tr-tributary-audiences-api." + namespace,
			"tr-tributary-audiences-api." + namespace + ".svc", "tr-tributary-audiences-api." + namespace + ".svc.cluster.local",
			"*.tr-tributary-audiences." + namespace, "*.tr-tributary-audiences." + namespace + ".svc", "*.tr-tributary-audiences." + namespace + ".svc.cluster.local"}, ","),
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("audiences: %s = %q, want %q", k, env[k], v)
		}
	}
	if env["AUDIENCE_SYNC_INTERVAL"] == "" {
		t.Error("audiences: no AUDIENCE_SYNC_INTERVAL")
	}
	if c.StartupProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("audiences probes: startup %q, liveness %q, readiness %q; want /healthz, /healthz, /readyz",
			c.StartupProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	headless := findManifest(t, objs, "Service", "tr-tributary-audiences")
	if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service tr-tributary-audiences: clusterIP %q, publishNotReadyAddresses %v; want None and true (pod names for AUDIENCES_PEER_URL)",
			headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	api := findManifest(t, objs, "Service", "tr-tributary-audiences-api")
	if api.Spec.ClusterIP == "None" || len(api.Spec.Ports) != 1 || api.Spec.Ports[0].TargetPort != "http" {
		t.Errorf("Service tr-tributary-audiences-api: clusterIP %q, ports %+v; want a virtual IP to the pods' http port", api.Spec.ClusterIP, api.Spec.Ports)
	}
}

// checkServiceMonitorsSelectOneService: each ServiceMonitor's selector matches exactly one
// Service, so that no pod is scraped twice (audiences has two Services on the same pods).
func checkServiceMonitorsSelectOneService(t *testing.T, manifests string) {
	t.Helper()
	objs := decodeManifests(t, manifests)
	for _, sm := range objs {
		if sm.Kind != "ServiceMonitor" {
			continue
		}
		var sel struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		}
		if err := sm.Spec.Selector.Decode(&sel); err != nil || len(sel.MatchLabels) == 0 {
			t.Errorf("ServiceMonitor %s: no matchLabels selector (%v)", sm.Metadata.Name, err)
			continue
		}
		var matched []string
		for _, svc := range objs {
			if svc.Kind != "Service" {
				continue
			}
			ok := true
			for k, v := range sel.MatchLabels {
				ok = ok && svc.Metadata.Labels[k] == v
			}
			if ok {
				matched = append(matched, svc.Metadata.Name)
			}
		}
		if len(matched) != 1 {
			t.Errorf("ServiceMonitor %s selects the Services %v, want exactly one", sm.Metadata.Name, matched)
		}
	}
}

// checkConsole checks the console's Deployment and Service (release "tr"): strategy
// RollingUpdate, one pod at a time and none unavailable (consoles may run side by side,
// docs/operations.md#two-consoles), CONSOLE_ADDR
// on 0.0.0.0:8090 (port http: the UI and the API, which an Ingress may route) and METRICS_ADDR on
// 0.0.0.0:9100 (port metrics: /metrics, which none routes), CONSOLE_TOKEN from the key of the
// Secret given, exactly the UI's other variables of want (CONSOLE_INGEST_URL,
// CONSOLE_AUDIENCES_URL, AUDIENCES_TOKEN as "secret:<name>/<key>"; one missing from want must
// not be set), the common Kafka settings (envFrom the env ConfigMap), probes on /healthz and
// /readyz, and a ClusterIP Service with port http 8090 and port metrics 9100.
func checkConsole(t *testing.T, manifests string, tokenSecret, tokenKey string, want map[string]string) {
	t.Helper()
	objs := decodeManifests(t, manifests)
	d := findManifest(t, objs, "Deployment", "tr-tributary-console")
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 1 {
		t.Errorf("console Deployment: replicas %v, want at least 1", d.Spec.Replicas)
	}
	if s := d.Spec.Strategy; s.Type != "RollingUpdate" || s.RollingUpdate["maxUnavailable"] != 0 {
		t.Errorf("console Deployment: strategy %+v, want RollingUpdate with maxUnavailable 0 (an upgrade keeps a console up)", s)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("console Deployment: %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("console: %s set twice", e.Name)
		}
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		default:
			env[e.Name] = fmt.Sprintf("%+v", *e.ValueFrom)
		}
	}
	wantEnv := map[string]string{
		"CONSOLE_ADDR":  "0.0.0.0:8090",
		"METRICS_ADDR":  "0.0.0.0:9100",
		"CONSOLE_TOKEN": "secret:" + tokenSecret + "/" + tokenKey,
	}
	maps.Copy(wantEnv, want)
	for _, k := range []string{"CONSOLE_ADDR", "METRICS_ADDR", "CONSOLE_TOKEN", "CONSOLE_INGEST_URL", "CONSOLE_AUDIENCES_URL", "AUDIENCES_TOKEN"} {
		got, ok := env[k]
		w, wanted := wantEnv[k]
		switch {
		case wanted && got != w:
			t.Errorf("console: %s = %q, want %q", k, got, w)
		case !wanted && ok:
			t.Errorf("console: %s = %q, want it unset", k, got)
		}
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if len(ports) != 2 || ports["http"] != 8090 || ports["metrics"] != 9100 {
		t.Errorf("console container ports %+v, want http 8090 and metrics 9100", c.Ports)
	}
	if env := workloadEnv(t, manifests)["console"]; !env["KAFKA_BROKERS"] || !env["LOG_LEVEL"] {
		t.Errorf("console: no KAFKA_BROKERS or LOG_LEVEL among %v", env)
	}
	if c.StartupProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("console probes: startup %q, liveness %q, readiness %q; want /healthz, /healthz, /readyz",
			c.StartupProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	svc := findManifest(t, objs, "Service", "tr-tributary-console")
	svcPorts := map[string]string{}
	for _, p := range svc.Spec.Ports {
		svcPorts[p.Name] = fmt.Sprintf("%d→%s", p.Port, p.TargetPort)
	}
	if svc.Spec.Type != "ClusterIP" || len(svcPorts) != 2 || svcPorts["http"] != "8090→http" || svcPorts["metrics"] != "9100→metrics" {
		t.Errorf("Service tr-tributary-console: type %q, ports %+v; want ClusterIP, port http 8090 to the pods' http port and metrics 9100 to their metrics port", svc.Spec.Type, svc.Spec.Ports)
	}
}

// podAnnotation returns an annotation of a workload's pod template ("" when it has none).
func podAnnotation(t *testing.T, manifests, kind, name, key string) string {
	t.Helper()
	return findManifest(t, decodeManifests(t, manifests), kind, name).Spec.Template.Metadata.Annotations[key]
}

// secretData returns the stringData of a rendered Secret, nil when it is not rendered.
func secretData(t *testing.T, manifests, name string) map[string]string {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(manifests))
	for {
		var o struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			StringData map[string]string `yaml:"stringData"`
		}
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			t.Fatalf("decoding the manifests: %v", err)
		}
		if o.Kind == "Secret" && o.Metadata.Name == name {
			return o.StringData
		}
	}
}

// checkIngress checks that the Ingress name routes host and path (a Prefix) to the Service of
// the same name, port http (and none of its paths to another port), with TLS from tlsSecret
// for that host (none when empty).
func checkIngress(t *testing.T, manifests, name, host, path, tlsSecret string) {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(manifests))
	for {
		var o struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			Spec struct {
				TLS []struct {
					SecretName string   `yaml:"secretName"`
					Hosts      []string `yaml:"hosts"`
				} `yaml:"tls"`
				Rules []struct {
					Host string `yaml:"host"`
					HTTP struct {
						Paths []struct {
							Path     string `yaml:"path"`
							PathType string `yaml:"pathType"`
							Backend  struct {
								Service struct {
									Name string `yaml:"name"`
									Port struct {
										Name string `yaml:"name"`
									} `yaml:"port"`
								} `yaml:"service"`
							} `yaml:"backend"`
						} `yaml:"paths"`
					} `yaml:"http"`
				} `yaml:"rules"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatalf("no Ingress %s in the rendered chart", name)
			}
			t.Fatalf("decoding the manifests: %v", err)
		}
		if o.Kind != "Ingress" || o.Metadata.Name != name {
			continue
		}
		routed := false
		for _, r := range o.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				routed = routed || (r.Host == host && p.Path == path && p.PathType == "Prefix" && p.Backend.Service.Name == name && p.Backend.Service.Port.Name == "http")
				if p.Backend.Service.Port.Name != "http" {
					t.Errorf("Ingress %s routes %s%s to port %q: only port http (never metrics) may be public", name, r.Host, p.Path, p.Backend.Service.Port.Name)
				}
			}
		}
		if !routed {
			t.Errorf("Ingress %s does not route %s%s (Prefix) to Service %s, port http: %+v", name, host, path, name, o.Spec.Rules)
		}
		if tlsSecret == "" {
			if len(o.Spec.TLS) != 0 {
				t.Errorf("Ingress %s: tls %+v, want none", name, o.Spec.TLS)
			}
		} else if len(o.Spec.TLS) != 1 || o.Spec.TLS[0].SecretName != tlsSecret || !slices.Contains(o.Spec.TLS[0].Hosts, host) {
			t.Errorf("Ingress %s: tls %+v, want %s for %s", name, o.Spec.TLS, tlsSecret, host)
		}
		return
	}
}

// containerEnv returns the plain variables (name → value; "secret:<name>/<key>" for a Secret's)
// of the first container of a rendered workload.
func containerEnv(t *testing.T, manifests, kind, name string) map[string]string {
	t.Helper()
	w := findManifest(t, decodeManifests(t, manifests), kind, name)
	if len(w.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("%s %s: no container", kind, name)
	}
	env := map[string]string{}
	for _, e := range w.Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return env
}

// networkPolicies returns the rendered NetworkPolicies (release "tr") by component, each as
// its ingress rules: "<port> from any", or "<port> from" and its peers ("pods:<labels>",
// "ns:<labels>", sorted matchLabels). It fails on a policy that does not select its
// component's pods or is not an ingress policy.
func networkPolicies(t *testing.T, manifests string) map[string][]string {
	t.Helper()
	type selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	labels := func(s *selector) string {
		var kv []string
		for k, v := range s.MatchLabels {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		return strings.Join(kv, ",")
	}
	out := map[string][]string{}
	dec := yaml.NewDecoder(strings.NewReader(manifests))
	for {
		var o struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name   string            `yaml:"name"`
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				PodSelector selector `yaml:"podSelector"`
				PolicyTypes []string `yaml:"policyTypes"`
				Ingress     []struct {
					Ports []struct {
						Port string `yaml:"port"`
					} `yaml:"ports"`
					From []struct {
						PodSelector       *selector `yaml:"podSelector"`
						NamespaceSelector *selector `yaml:"namespaceSelector"`
					} `yaml:"from"`
				} `yaml:"ingress"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding the manifests: %v", err)
		}
		if o.Kind != "NetworkPolicy" {
			continue
		}
		c := o.Metadata.Labels["app.kubernetes.io/component"]
		if want := "app.kubernetes.io/component=" + c + ",app.kubernetes.io/instance=tr,app.kubernetes.io/name=tributary"; labels(&o.Spec.PodSelector) != want || !slices.Equal(o.Spec.PolicyTypes, []string{"Ingress"}) {
			t.Errorf("NetworkPolicy %s: podSelector %v, policyTypes %v; want %s and [Ingress]", o.Metadata.Name, o.Spec.PodSelector.MatchLabels, o.Spec.PolicyTypes, want)
		}
		for _, r := range o.Spec.Ingress {
			var ports []string
			for _, p := range r.Ports {
				ports = append(ports, p.Port)
			}
			rule := strings.Join(ports, ",") + " from"
			if len(r.From) == 0 {
				rule += " any"
			}
			for _, f := range r.From {
				switch {
				case f.PodSelector != nil && f.NamespaceSelector == nil:
					rule += " pods:" + labels(f.PodSelector)
				case f.NamespaceSelector != nil && f.PodSelector == nil:
					rule += " ns:" + labels(f.NamespaceSelector)
				default:
					rule += " other"
				}
			}
			out[c] = append(out[c], rule)
		}
	}
}
