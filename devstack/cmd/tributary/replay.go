package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// replayUsage is printed by `tributary replay -h`.
const replayUsage = `tributary replay -destination ID -from TIME [-to TIME] [filters] [-start]
tributary replay -status REPLAY_ID | -cancel REPLAY_ID | -list

Replays the messages of tracking.events received from -from to -to (RFC 3339 times, or
durations back from now such as 2h) to a destination, through the console's API
(POST /v1/replays, docs/delivery.md#replay). Without -start it is a dry run: it prints how many
messages match. With -start it starts the replay and prints its progress every -poll until it
ends (Ctrl-C stops watching; the replay goes on: -cancel stops it).

The console is CONSOLE_URL (default http://127.0.0.1:8090, make run's); its token is
CONSOLE_TOKEN, else the file DATA_DIR/console-token (.data/console-token) make run generates.

`

// replayFlags are the flags of `tributary replay`.
type replayFlags struct {
	destination, from, to, typ, event, user, source, url string
	rate                                                 int
	start, list                                          bool
	status, cancel                                       string
	poll                                                 time.Duration
}

// runReplay is `tributary replay`: one call of the console's replays API (and, with -start,
// polling of the replay's progress until it ends or ctx is done).
func runReplay(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("tributary replay", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprint(errOut, replayUsage); fs.PrintDefaults() }
	var f replayFlags
	fs.StringVar(&f.destination, "destination", "", "the destination's id")
	fs.StringVar(&f.from, "from", "", "the start of the range: an RFC 3339 time, or a duration back from now (2h)")
	fs.StringVar(&f.to, "to", "", "the end of the range (default: now)")
	fs.StringVar(&f.typ, "type", "", "only messages of this type (track, identify, page, screen, group, alias)")
	fs.StringVar(&f.event, "event", "", "only track calls of this event name")
	fs.StringVar(&f.user, "user", "", "only this userId's messages")
	fs.StringVar(&f.source, "source", "", "only this source's messages")
	fs.StringVar(&f.url, "url", "", "send to this URL instead of the destination's webhooks")
	fs.IntVar(&f.rate, "max-per-second", 0, "the most messages a second (default 100, at most 5000)")
	fs.BoolVar(&f.start, "start", false, "start the replay (without it: a dry run, which only counts)")
	fs.BoolVar(&f.list, "list", false, "list the console's replays")
	fs.StringVar(&f.status, "status", "", "print a replay's progress")
	fs.StringVar(&f.cancel, "cancel", "", "cancel a running replay")
	fs.DurationVar(&f.poll, "poll", 2*time.Second, "how often -start prints the progress")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("replay: unexpected argument %q (see tributary replay -h)", fs.Arg(0))
	}
	c, err := newConsoleClient()
	if err != nil {
		return err
	}
	switch {
	case f.list:
		return c.print(ctx, out, http.MethodGet, "/v1/replays", nil)
	case f.status != "":
		return c.print(ctx, out, http.MethodGet, "/v1/replays/"+f.status, nil)
	case f.cancel != "":
		return c.print(ctx, out, http.MethodDelete, "/v1/replays/"+f.cancel, nil)
	}
	if f.destination == "" || f.from == "" {
		fs.Usage()
		return errors.New("replay: -destination and -from are required")
	}
	now := time.Now()
	body := map[string]any{"destinationId": f.destination, "dryRun": !f.start}
	for name, v := range map[string]string{"from": f.from, "to": f.to} {
		if v == "" {
			continue
		}
		t, err := flagTime(v, now)
		if err != nil {
			return fmt.Errorf("replay: -%s: %w", name, err)
		}
		body[name] = t
	}
	filter := map[string]string{}
	for k, v := range map[string]string{"type": f.typ, "event": f.event, "userId": f.user, "sourceId": f.source} {
		if v != "" {
			filter[k] = v
		}
	}
	body["filter"] = filter
	if f.url != "" {
		body["url"] = f.url
	}
	if f.rate != 0 {
		body["maxPerSecond"] = f.rate
	}
	var created struct {
		Data struct {
			Matched  int64  `json:"matched"`
			ReplayID string `json:"replayId"`
		} `json:"data"`
	}
	if err := c.call(ctx, http.MethodPost, "/v1/replays", body, &created); err != nil {
		return err
	}
	if !f.start {
		fmt.Fprintf(out, "%d messages match (a dry run: add -start to replay them)\n", created.Data.Matched)
		return nil
	}
	id := created.Data.ReplayID
	fmt.Fprintf(out, "replay %s started: %d messages (cancel: tributary replay -cancel %s)\n", id, created.Data.Matched, id)
	tick := time.NewTicker(f.poll)
	defer tick.Stop()
	for {
		var p struct {
			Data struct {
				Matched, Sent, Delivered, Failed int64
				State, Error                     string
			} `json:"data"`
		}
		if err := c.call(ctx, http.MethodGet, "/v1/replays/"+id, nil, &p); err != nil {
			return err
		}
		d := p.Data
		fmt.Fprintf(out, "%s: matched %d, sent %d, delivered %d, failed %d\n", d.State, d.Matched, d.Sent, d.Delivered, d.Failed)
		switch d.State {
		case "failed":
			return fmt.Errorf("replay %s failed: %s", id, d.Error)
		case "done", "cancelled":
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "stopped watching; the replay goes on (tributary replay -status %s)\n", id)
			return nil
		case <-tick.C:
		}
	}
}

// flagTime reads a time flag: RFC 3339, or a positive duration back from now.
func flagTime(v string, now time.Time) (string, error) {
	if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return v, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d).UTC().Format(time.RFC3339Nano), nil
	}
	return "", fmt.Errorf("%q is neither an RFC 3339 time (2026-11-27T10:00:00Z) nor a duration back from now (2h)", v)
}

// consoleClient calls the console's API with its token.
type consoleClient struct {
	base, token string
	http        *http.Client
}

func newConsoleClient() (*consoleClient, error) {
	base := strings.TrimRight(os.Getenv("CONSOLE_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:8090"
	}
	token := os.Getenv("CONSOLE_TOKEN")
	if token == "" {
		dir := os.Getenv("DATA_DIR")
		if dir == "" {
			dir = ".data"
		}
		b, err := os.ReadFile(filepath.Join(dir, "console-token"))
		if err != nil {
			return nil, fmt.Errorf("replay: no CONSOLE_TOKEN, and %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return &consoleClient{base: base, token: token, http: &http.Client{Timeout: time.Minute}}, nil
}

// call sends body (JSON; nil: none) and decodes a 2xx answer into out; any other answer is an
// error with the console's message.
func (c *consoleClient) call(ctx context.Context, method, path string, body, out any) error {
	raw, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// print sends the request and prints the answer's data as indented JSON.
func (c *consoleClient) print(ctx context.Context, out io.Writer, method, path string, body any) error {
	raw, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	var v struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, v.Data, "", "  "); err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, buf.String())
	return err
}

func (c *consoleClient) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replay: calling the console: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Message, Field string }
		if json.Unmarshal(raw, &e) == nil && e.Message != "" {
			return nil, fmt.Errorf("replay: the console answered %d: %s", resp.StatusCode, e.Message)
		}
		return nil, fmt.Errorf("replay: the console answered %d", resp.StatusCode)
	}
	return raw, nil
}

// replayMain is `tributary replay`'s main; it returns the exit code.
func replayMain(args []string) int { return commandMain(runReplay, args) }
