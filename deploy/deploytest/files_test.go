package deploytest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// repoRoot is the folder holding go.work.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's folder")
		}
		dir = parent
	}
}

// ---- deploy/docker/Dockerfile

// stage is one FROM of the Dockerfile.
type stage struct {
	Name, From  string
	Env         map[string]string
	Entrypoint  []string
	Cmd         []string
	Healthcheck []string // the CMD of HEALTHCHECK
	Copies      []string // COPY --from=build sources
}

// dockerfile is the parsed Dockerfile: its stages and the packages the build stage compiles.
type dockerfile struct {
	Stages   map[string]*stage
	Order    []string
	Packages []string // ./x/cmd/y of the build stage's go build
}

var (
	fromLine = regexp.MustCompile(`(?i)^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$`)
	pkgArg   = regexp.MustCompile(`^\./[a-z0-9/_-]+/cmd/[a-z0-9_-]+$`)
)

// parseDockerfile reads the instructions this repository's Dockerfile uses: FROM, ENV
// (key=value pairs), ENTRYPOINT and CMD (exec form), HEALTHCHECK CMD (exec form), COPY
// --from, and the build stage's go build arguments. Continuation lines are joined.
func parseDockerfile(t testing.TB, path string) *dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if strings.HasPrefix(l, "#") { // a comment inside a continued instruction
			continue
		}
		if before, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(before + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	df := &dockerfile{Stages: map[string]*stage{}}
	var st *stage
	execForm := func(s string) []string {
		var v []string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("%s: %q is not in exec form (a JSON array): %v", path, s, err)
		}
		return v
	}
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			m := fromLine.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("%s: cannot read %q", path, l)
			}
			st = &stage{Name: m[2], From: m[1], Env: map[string]string{}}
			if st.Name == "" {
				st.Name = fmt.Sprintf("#%d", len(df.Order))
			}
			df.Stages[st.Name] = st
			df.Order = append(df.Order, st.Name)
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("%s: ENV %q: use key=value", path, rest)
				}
				st.Env[k] = strings.Trim(v, `"`)
			}
		case "ENTRYPOINT":
			st.Entrypoint = execForm(rest)
		case "CMD":
			st.Cmd = execForm(rest)
		case "HEALTHCHECK":
			_, cmd, ok := strings.Cut(rest, "CMD ")
			if !ok {
				t.Fatalf("%s: HEALTHCHECK without CMD: %q", path, l)
			}
			st.Healthcheck = execForm(strings.TrimSpace(cmd))
		case "COPY":
			if f := strings.Fields(rest); len(f) >= 3 && strings.HasPrefix(f[0], "--from=") {
				st.Copies = append(st.Copies, f[1])
			}
		case "RUN":
			if strings.Contains(rest, "go build") {
				for _, a := range strings.Fields(rest) {
					if pkgArg.MatchString(a) {
						df.Packages = append(df.Packages, a)
					}
				}
			}
		}
	}
	return df
}

// chain returns the stage and the stages it derives from, the base last.
func (df *dockerfile) chain(name string) []*stage {
	var out []*stage
	for st := df.Stages[name]; st != nil; st = df.Stages[st.From] {
		out = append(out, st)
	}
	return out
}

// image returns what a container of target starts with: the ENV of its stages (the target's
// winning) and its ENTRYPOINT and CMD.
func (df *dockerfile) image(target string) (env map[string]string, entrypoint, cmd []string) {
	env = map[string]string{}
	ch := df.chain(target)
	for i := len(ch) - 1; i >= 0; i-- {
		for k, v := range ch[i].Env {
			env[k] = v
		}
		if ch[i].Entrypoint != nil {
			entrypoint, cmd = ch[i].Entrypoint, nil // a new ENTRYPOINT resets CMD
		}
		if ch[i].Cmd != nil {
			cmd = ch[i].Cmd
		}
	}
	return env, entrypoint, cmd
}

// packageOf returns the build stage's package whose binary is named bin.
func (df *dockerfile) packageOf(bin string) (string, bool) {
	for _, p := range df.Packages {
		if filepath.Base(p) == bin {
			return p, true
		}
	}
	return "", false
}

// ---- docker-compose.yml

type composeFile struct {
	Services map[string]*composeService `yaml:"services"`
	Volumes  map[string]any             `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string            `yaml:"context"`
		Dockerfile string            `yaml:"dockerfile"`
		Target     string            `yaml:"target"`
		Args       map[string]string `yaml:"args"`
	} `yaml:"build"`
	Environment map[string]*string `yaml:"environment"`
	Command     []string           `yaml:"command"`
	Entrypoint  []string           `yaml:"entrypoint"`
	Ports       []string           `yaml:"ports"`
	Volumes     []string           `yaml:"volumes"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

// defaultInterpolation is compose's ${NAME:-default}: the variable from the shell (or .env),
// else the default.
var defaultInterpolation = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}$]*)\}`)

// requiredInterpolation is compose's ${NAME:?message}: the variable from the shell (or .env),
// without which compose refuses to start, printing the message.
var requiredInterpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*):\?([^}$]*)\}`)

// requiredValues are the values the tests give some variables docker-compose.yml requires
// (${NAME:?message}), as a user does in the shell or in .env: CONSOLE_TOKEN must pass the
// console's strength check.
var requiredValues = map[string]string{
	"CONSOLE_TOKEN": "9c4e1f7a2b6d0e3c8f5a1d7b4e2c9f6a0b3d8e5c1f7a4b2d", // openssl rand -hex 24
}

// requiredValue is the value the tests give a variable that docker-compose.yml requires
// (${NAME:?message}): requiredValues', else "deploytest-<name>" (AUDIENCES_TOKEN is
// "deploytest-audiences-token").
func requiredValue(name string) string {
	if v, ok := requiredValues[name]; ok {
		return v
	}
	return "deploytest-" + strings.ToLower(strings.ReplaceAll(name, "_", "-"))
}

// composeRequired returns the variables docker-compose.yml requires (${NAME:?message}), each
// once, with its message.
func composeRequired(t testing.TB, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range requiredInterpolation.FindAllSubmatch(raw, -1) {
		out[string(m[1])] = string(m[2])
	}
	return out
}

// parseCompose reads docker-compose.yml. It supports the forms the file uses (mapping
// environment, list command, long depends_on). Of interpolation it supports ${NAME:-default},
// read as its default (what compose does when NAME is not set), and ${NAME:?message}, read as
// requiredValue(NAME) (what the shell or .env gives it); any other form fails, since the
// topology test would not reproduce it.
func parseCompose(t testing.TB, path string) *composeFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data := defaultInterpolation.ReplaceAll(raw, []byte("$1"))
	data = requiredInterpolation.ReplaceAllFunc(data, func(m []byte) []byte {
		return []byte(requiredValue(string(requiredInterpolation.FindSubmatch(m)[1])))
	})
	if strings.Contains(string(data), "$") {
		t.Fatalf("%s: uses $ interpolation other than ${NAME:-default} and ${NAME:?message}, which deploy/deploytest does not reproduce", path)
	}
	var cf composeFile
	if err := yaml.Unmarshal(data, &cf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(cf.Services) == 0 {
		t.Fatalf("%s: no services", path)
	}
	for name, s := range cf.Services {
		for k, v := range s.Environment {
			if v == nil {
				t.Fatalf("%s: services.%s.environment.%s has no value (taken from the host): give one", path, name, k)
			}
		}
	}
	return &cf
}

// tributaryServices are the services built from the Dockerfile, sorted by name.
func (cf *composeFile) tributaryServices() []string {
	var out []string
	for name, s := range cf.Services {
		if s.Build != nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ---- environment variable names in the code

// envNamesInCode returns every quoted upper-case identifier with an underscore or a known
// prefix in the non-test Go files under dirs: the candidates for environment variable names.
func envNamesInCode(t testing.TB, dirs ...string) map[string]bool {
	t.Helper()
	quoted := regexp.MustCompile(`"([A-Z][A-Z0-9_]+)"`)
	names := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range quoted.FindAllSubmatch(data, -1) {
				names[string(m[1])] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// sourceDirs returns the folders whose code reads the environment of the binary built from pkg
// (./router/cmd/router): its module (only its cmd folder for devstack, whose library reads
// the settings of `make run`) and platform.
func sourceDirs(root, pkg string) []string {
	rel := strings.TrimPrefix(pkg, "./")
	mod, _, _ := strings.Cut(rel, "/")
	dirs := []string{filepath.Join(root, "platform")}
	if mod == "devstack" {
		return append(dirs, filepath.Join(root, rel))
	}
	return append(dirs, filepath.Join(root, mod))
}
