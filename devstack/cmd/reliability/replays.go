package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The hostile scenario's replay check (docs/reliability.md): a dead-lettered message replayed by
// id several times to a failing URL, then to a good one, is received once. Each failed replay
// dead-letters the message anew; a replay takes the message's newest dead letter alone
// (docs/delivery.md#dead-letters-and-replay), so the copies do not double at every replay.

// replaysWriteKey is the write key of the source "replays", whose events go to the destination
// "replays" alone (not to the measured one).
const replaysWriteKey = "wk_replays"

// withReplays adds to a tenant config (configWith's) the source "replays" and the destination
// "replays", whose webhook answers 410: its messages are dead-lettered at once.
func withReplays(config string, rcv *receiver) string {
	config = strings.Replace(config, "destinations:\n", fmt.Sprintf(`  - id: replays
    name: Replays
    writeKey: %s
destinations:
`, replaysWriteKey), 1)
	return config + fmt.Sprintf(`  - id: replays
    type: webhooks
    sources: [replays]
    settings: {webhooks: [{url: %q}], sharedSecret: %s}
`, rcv.url("/gone"), sharedSecret)
}

// replayOnce sends one message to the destination "replays", replays it by id with `deliverer
// replay` three times to the failing URL (each time waiting until it is dead-lettered again),
// then to a good URL (/replayed), and checks that every replay sent one copy and that the good
// URL received exactly one.
func replayOnce(ctx context.Context, e *env) {
	id := e.load.prefix + "-replay-once"
	body := fmt.Appendf(nil, `{"type":"track","event":"Replayed","userId":"u-replay","messageId":%q}`, id)
	if st := postJSON(&http.Client{Timeout: 10 * time.Second}, e.st.ingestURL+"/v1/track", replaysWriteKey, body, false); st != "200" {
		e.fail("replay check: sending %s answered %s", id, st)
		return
	}
	var counts []int
	for i := range 4 {
		if err := waitDeadLetter(ctx, e, id); err != nil {
			e.fail("replay check: before replay %d: %v", i+1, err)
			return
		}
		to := e.rcv.url("/gone")
		if i == 3 {
			to = e.rcv.url("/replayed")
		}
		out, err := runDeliverer(ctx, e, "replay", "-destination", "replays", "-message-id", id, "-url", to)
		if err != nil {
			e.fail("replay check: deliverer replay: %v\n%s", err, out)
			return
		}
		var n int
		if _, err := fmt.Sscanf(out, "replayed %d", &n); err != nil {
			e.fail("replay check: deliverer replay said %q", out)
			return
		}
		counts = append(counts, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.rcv.counts("/replayed")[id] == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		sleep(ctx, 100*time.Millisecond)
	}
	sleep(ctx, 2*time.Second) // late copies
	got := e.rcv.counts("/replayed")[id]
	e.note("a message replayed by id 3 times to a failing URL, then to a good one: replayed %v, received %d", counts, got)
	for _, n := range counts {
		if n != 1 {
			e.fail("a replay by message id sent %v copies, want 1 each time", counts)
			break
		}
	}
	if got != 1 {
		e.fail("the message replayed by id was received %d times, want once", got)
	}
}

// waitDeadLetter waits until `deliverer dlq list` shows id not replayed.
func waitDeadLetter(ctx context.Context, e *env, id string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := runDeliverer(ctx, e, "dlq", "list", "-destination", "replays", "-message-id", id)
		if err == nil && strings.Contains(out, id) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not in the DLQ after 30 s (deliverer dlq list: %v)\n%s", id, err, out)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// runDeliverer runs bin/deliverer with args against the stack's broker and returns its output.
func runDeliverer(ctx context.Context, e *env, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(e.st.bin, "deliverer"), args...)
	cmd.Env = append(cmd.Environ(), e.st.serviceEnv()...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
