package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// retrySchedule is the harness's RETRY_SCHEDULE: the same tiers as production's first ones,
// but short, so that what a fault delays drains within the scenario (a two-minute outage is
// retried every 30 s after a minute); 12 retries, about 4.5 minutes.
const retrySchedule = "1s,2s,5s,10s,20s,30s,30s,30s,30s,30s,30s,30s"

// proc is one service of the stack, run as its own process from bin/: it can be killed,
// stopped, continued and started again with the same settings (ports, ids, data).
type proc struct {
	name string
	args []string
	env  []string
	log  string // its stdout and stderr, appended across restarts
	// readyURL, when set, answers 200 once the process is ready.
	readyURL string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "--- %s start %s\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a signal to the harness (Ctrl-C) does not reach it directly; the
	// harness stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	return nil
}

// signal sends sig to the running process; it says whether one was running.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	return true
}

// kill SIGKILLs the process and waits until it is gone.
func (p *proc) kill() {
	if p.signal(syscall.SIGKILL) {
		<-p.done
	}
}

// stop asks the process to stop (SIGTERM, after a SIGCONT in case it was stopped) and kills it
// after 15 s.
func (p *proc) stop() {
	p.signal(syscall.SIGCONT)
	if !p.signal(syscall.SIGTERM) {
		return
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.kill()
	}
}

// alive says whether the process runs.
func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// waitReady polls readyURL until it answers 200 (or the process exits, or the timeout).
func (p *proc) waitReady(ctx context.Context, timeout time.Duration) error {
	if p.readyURL == "" {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(p.readyURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.alive() {
			return fmt.Errorf("%s exited while starting (log: %s)", p.name, p.log)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready after %s (log: %s)", p.name, timeout, p.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// broker is the stack's Kafka: the embedded broker in its own process (this program, run as
// "reliability broker"), or Apache Kafka through deploy/kafka/kafka.sh.
type broker interface {
	addr() string
	freeze()
	thaw()
	kill()
	restart(ctx context.Context) error
	close()
}

// embeddedBroker runs "reliability broker -data DIR -port N": the embedded broker (franz-go's
// kfake persisted to DIR), restarted on the same port and data after a kill.
type embeddedBroker struct {
	p    *proc
	port int
}

func startEmbedded(ctx context.Context, dir string) (*embeddedBroker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &embeddedBroker{port: port, p: &proc{
		name: "broker", args: []string{self, "broker", "-data", filepath.Join(dir, "kafka"), "-port", strconv.Itoa(port)},
		log: filepath.Join(dir, "broker.log"),
	}}
	if err := b.p.start(); err != nil {
		return nil, err
	}
	return b, waitPort(ctx, b.addr(), 30*time.Second)
}

func (b *embeddedBroker) addr() string { return "127.0.0.1:" + strconv.Itoa(b.port) }
func (b *embeddedBroker) freeze()      { b.p.signal(syscall.SIGSTOP) }
func (b *embeddedBroker) thaw()        { b.p.signal(syscall.SIGCONT) }
func (b *embeddedBroker) kill()        { b.p.kill() }
func (b *embeddedBroker) close()       { b.p.stop() }
func (b *embeddedBroker) restart(ctx context.Context) error {
	if err := b.p.start(); err != nil {
		return err
	}
	return waitPort(ctx, b.addr(), 60*time.Second)
}

// apacheBroker is Apache Kafka run by deploy/kafka/kafka.sh with its state in the scenario's
// folder: freeze and kill signal the broker's pid; restart is `kafka.sh start`, the same
// node on the same ports and log directories.
type apacheBroker struct {
	script, state, address string
}

func startApache(ctx context.Context, root, dir string) (*apacheBroker, error) {
	b := &apacheBroker{script: filepath.Join(root, "deploy/kafka/kafka.sh"), state: filepath.Join(dir, "apache-kafka")}
	out, err := b.run(ctx, "up")
	if err != nil {
		return nil, err
	}
	b.address = strings.TrimSpace(out)
	return b, nil
}

func (b *apacheBroker) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.script, args...)
	cmd.Env = append(os.Environ(), "KAFKA_STATE_DIR="+b.state)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kafka.sh %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

func (b *apacheBroker) pid() int {
	raw, _ := os.ReadFile(filepath.Join(b.state, "pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	return pid
}

func (b *apacheBroker) signal(sig syscall.Signal) {
	if pid := b.pid(); pid > 0 {
		_ = syscall.Kill(pid, sig)
	}
}

func (b *apacheBroker) addr() string { return b.address }
func (b *apacheBroker) freeze()      { b.signal(syscall.SIGSTOP) }
func (b *apacheBroker) thaw()        { b.signal(syscall.SIGCONT) }
func (b *apacheBroker) kill() {
	pid := b.pid()
	b.signal(syscall.SIGKILL)
	for i := 0; i < 100 && pid > 0 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
}
func (b *apacheBroker) restart(ctx context.Context) error {
	_, err := b.run(ctx, "start")
	return err
}

// close stops the broker (SIGTERM, SIGKILL after 20 s) and leaves its state folder, in the
// scenario's folder: a failed scenario keeps the broker's data with the logs (`kafka.sh down`
// would remove it); a passed one's folder is removed whole.
func (b *apacheBroker) close() {
	b.thaw()
	pid := b.pid()
	if pid <= 0 {
		return
	}
	b.signal(syscall.SIGTERM)
	for i := 0; i < 200 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	b.kill()
}

// stack is the whole of Tributary as separate processes: one ingest, two routers, two
// deliverers, on one broker, configured by tributary-init.
type stack struct {
	dir, bin   string
	logLevel   string
	broker     broker
	ingest     *proc
	services   []*proc // ingest, routers, deliverers
	ingestURL  string
	configFile string
}

// serviceEnv is what every service gets.
func (s *stack) serviceEnv(extra ...string) []string {
	return append([]string{
		"KAFKA_BROKERS=" + s.broker.addr(), "KAFKA_PARTITIONS=6", "LOG_LEVEL=" + s.logLevel,
		"RETRY_SCHEDULE=" + retrySchedule, "WEBHOOK_ALLOW_PRIVATE=true",
	}, extra...)
}

func startStack(ctx context.Context, o options, dir, config string) (*stack, error) {
	s := &stack{dir: dir, bin: o.bin, logLevel: o.logLevel, configFile: filepath.Join(dir, "config.yaml")}
	var err error
	if o.apache {
		s.broker, err = startApache(ctx, o.root, dir)
	} else {
		s.broker, err = startEmbedded(ctx, dir)
	}
	if err != nil {
		return nil, err
	}
	if err := s.applyConfig(ctx, config); err != nil {
		s.close()
		return nil, err
	}
	ingestPort, err := freePort()
	if err != nil {
		s.close()
		return nil, err
	}
	s.ingestURL = "http://127.0.0.1:" + strconv.Itoa(ingestPort)
	s.ingest = &proc{name: "ingest", args: []string{filepath.Join(s.bin, "ingest")},
		env:      s.serviceEnv("INGEST_ADDR=127.0.0.1:"+strconv.Itoa(ingestPort), "METRICS_ADDR="),
		log:      filepath.Join(dir, "ingest.log"),
		readyURL: s.ingestURL + "/readyz"}
	s.services = []*proc{s.ingest}
	for _, svc := range []string{"router", "deliverer"} {
		for i := 1; i <= 2; i++ {
			port, err := freePort()
			if err != nil {
				s.close()
				return nil, err
			}
			name := fmt.Sprintf("%s-%d", svc, i)
			env := s.serviceEnv("METRICS_ADDR=127.0.0.1:" + strconv.Itoa(port))
			if svc == "router" {
				env = append(env, "ROUTER_TRANSACTIONAL_ID=reliability-"+name)
			} else {
				env = append(env, "DELIVERER_INSTANCE_ID=reliability-"+name)
			}
			s.services = append(s.services, &proc{name: name, args: []string{filepath.Join(s.bin, svc)}, env: env,
				log: filepath.Join(dir, name+".log"), readyURL: "http://127.0.0.1:" + strconv.Itoa(port) + "/readyz"})
		}
	}
	for _, p := range s.services {
		if err := p.start(); err != nil {
			s.close()
			return nil, err
		}
	}
	for _, p := range s.services {
		if err := p.waitReady(ctx, 60*time.Second); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// applyConfig writes the tenant config and runs tributary-init (topics, then the config);
// it returns once the config is acknowledged by Kafka.
func (s *stack) applyConfig(ctx context.Context, config string) error {
	if err := os.WriteFile(s.configFile, []byte(config), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "tributary-init"))
	cmd.Env = append(os.Environ(), s.serviceEnv("CONFIG_FILE="+s.configFile, "INIT_TIMEOUT=60s")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tributary-init: %w\n%s", err, out)
	}
	return nil
}

func (s *stack) close() {
	var wg sync.WaitGroup
	for _, p := range s.services {
		wg.Go(p.stop)
	}
	wg.Wait()
	if s.broker != nil {
		s.broker.close()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitPort(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.Join(fmt.Errorf("broker at %s not listening after %s", addr, timeout), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
