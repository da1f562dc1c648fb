package analytics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the Client fields and the limits of docs/client.md#batching-limits-and-the-wire.
const (
	DefaultEndpoint      = "http://localhost:8080"
	DefaultFlushAt       = 20
	DefaultFlushAfter    = 5 * time.Second
	DefaultQueueSize     = 10_000
	DefaultCloseTimeout  = 10 * time.Second
	DefaultMaxRetries    = 10
	DefaultRetryInitial  = 100 * time.Millisecond
	DefaultRetryMax      = 10 * time.Second
	DefaultCompressAbove = 32 << 10
	// MaxMessageBytes is the largest message, as JSON, a call accepts: 32 KB.
	MaxMessageBytes = 32 << 10
	// MaxBatchBytes is the largest batch request body (before compression): 500 KB.
	MaxBatchBytes = 500 << 10
	// MaxBatchMessages is the most messages one batch holds (ingest's limit).
	MaxBatchMessages = 2500
	// maxRetryAfter caps the wait a Retry-After answer can impose.
	maxRetryAfter = time.Minute
)

// LibraryName and Version are sent in every message's context.library.
const (
	LibraryName = "tributary-analytics-go"
	Version     = "1.0.0"
)

// Callback is told the outcome of every queued message, from the library's sender goroutine:
// Success once the server (or Kafka) accepted it, Failure when it was refused or given up on.
// Implementations must be safe for concurrent use and should return quickly: the sender waits
// for them.
type Callback interface {
	Success(m Message)
	Failure(m Message, err error)
}

// Client queues messages and sends them in batches from background goroutines. Create it with
// New, set the exported fields before the first call (they are read once, then), and Close it
// when done. Its methods are safe for concurrent use.
//
// A call returns without any network I/O: nil once the message is queued, a *ValidationError
// naming the field when the message cannot be sent, ErrQueueFull or ErrClosed. The queue is
// flushed when it holds FlushAt messages or FlushAfter after the previous flush.
type Client struct {
	// Endpoint is the tracking API's base URL; batches are POSTed to Endpoint + "/v1/batch".
	// Default DefaultEndpoint (the local ingest).
	Endpoint string

	// FlushAt is the number of queued messages that triggers a flush (default 20). 1 turns
	// batching off: every call is sent at once.
	FlushAt int
	// Size is FlushAt under its second documented name (docs/client.md#the-client): whichever of the two
	// is set wins. Setting both to different values is a *ConfigError.
	Size int
	// FlushAfter is the time since the last flush after which queued messages are sent even
	// if fewer than FlushAt (default 5 s).
	FlushAfter time.Duration

	// QueueSize bounds the messages held in memory: queued, waiting to be sent, or being sent
	// and retried (default 10,000; at least FlushAt). When it is reached, a call returns
	// ErrQueueFull at once without queueing its message, unless BlockWhenFull is set, in
	// which case the call waits for room (or for Close). Either way nothing is dropped
	// without the caller knowing.
	QueueSize     int
	BlockWhenFull bool

	// CloseTimeout bounds how long Close waits for queued messages to be sent (default 10 s).
	// Messages still unsent then are reported to Callback.Failure with ErrClosed.
	CloseTimeout time.Duration

	// Retries of a batch that failed with a network error, a 5xx, 408 or 429: exponential
	// backoff with jitter from RetryInitialInterval (default 100 ms) doubling up to
	// RetryMaxInterval (default 10 s), at most MaxRetries times (default 10; negative: never
	// retry). A Retry-After answer is honoured (up to one minute). Other 4xx answers are not
	// retried.
	MaxRetries           int
	RetryInitialInterval time.Duration
	RetryMaxInterval     time.Duration

	// MaxConcurrentRequests is how many batches are sent at the same time (default 1, which
	// keeps messages in the order of the calls).
	MaxConcurrentRequests int

	// HTTPClient sends the requests. Default: a client of its own with a 10 s timeout, whose
	// idle connections Close closes.
	HTTPClient *http.Client
	// CompressAbove: request bodies of at least this many bytes are gzipped (default 32 KiB;
	// negative: never).
	CompressAbove int

	// Kafka, when set, produces every message straight to Kafka (tracking.inbound) instead of
	// POSTing to Endpoint. Batching, limits and Close behave the same.
	Kafka *KafkaTransport

	// Callback, when set, is told the outcome of every message.
	Callback Callback
	// Logger receives the runtime log. Default: none, or standard error when the environment
	// variable DEBUG is "analytics".
	Logger Logger

	writeKey string
	clock    clock // nil: the system clock

	once sync.Once
	err  error // the *ConfigError found at start, returned by every call
	cfg  config
	tr   transport
	log  Logger

	mu        sync.Mutex
	room      sync.Cond // queued went down, or closed
	work      sync.Cond // pending grew, or stopping
	cur       *batch    // being filled
	pending   []*batch  // sealed, waiting for a sender
	open      []*result // sealed and not finished, oldest first
	free      []*batch  // reusable batches
	queued    int       // messages accepted and not finished
	lastFlush time.Time
	closed    bool // no more calls
	stopping  bool // senders exit once pending is empty

	ctx    context.Context // canceled when Close's deadline passes
	abort  context.CancelFunc
	stop   chan struct{} // stops the flusher
	wg     sync.WaitGroup
	encode sync.Pool // *encoder
}

// config is the resolved, validated form of the Client fields.
type config struct {
	url           string
	flushAt       int
	flushAfter    time.Duration
	queueSize     int
	block         bool
	closeTimeout  time.Duration
	maxRetries    int
	retryInitial  time.Duration
	retryMax      time.Duration
	concurrency   int
	compressAbove int
	kafka         bool
}

// New returns a client that sends with writeKey, the source's write key (sent as the HTTP
// Basic user name, or as the write-key record header on Kafka). Set the fields, then make
// calls; nothing starts until the first call.
func New(writeKey string) *Client {
	return &Client{writeKey: writeKey}
}

// Identify queues an identify call. See Client for the return values.
func (c *Client) Identify(m *Identify) error { return c.enqueue(m) }

// Track queues a track call. See Client for the return values.
func (c *Client) Track(m *Track) error { return c.enqueue(m) }

// Page queues a page call. See Client for the return values.
func (c *Client) Page(m *Page) error { return c.enqueue(m) }

// Screen queues a screen call. See Client for the return values.
func (c *Client) Screen(m *Screen) error { return c.enqueue(m) }

// Group queues a group call. See Client for the return values.
func (c *Client) Group(m *Group) error { return c.enqueue(m) }

// Alias queues an alias call. See Client for the return values.
func (c *Client) Alias(m *Alias) error { return c.enqueue(m) }

// Enqueue queues any message of this package (*Identify, *Track, ...), like the call of its
// type.
func (c *Client) Enqueue(m Message) error {
	if m == nil {
		return &ValidationError{Type: "unknown", Reason: "nil message"}
	}
	return c.enqueue(m)
}

func (c *Client) enqueue(m Message) error {
	c.once.Do(c.start)
	if c.err != nil {
		return c.err
	}
	if verr := m.validate(); verr != nil {
		return verr
	}
	e := c.encode.Get().(*encoder)
	defer c.encode.Put(e)
	id, err := e.newMessageID()
	if err != nil {
		return fmt.Errorf("analytics: generating a messageId: %w", err)
	}
	now := c.clock.Now()
	if verr := e.encodeMessage(m, (*[16]byte)(&id), now); verr != nil {
		return verr
	}
	var key string
	if c.cfg.kafka {
		key = recordKey(m)
	}

	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return ErrClosed
		}
		if c.queued < c.cfg.queueSize {
			break
		}
		if !c.cfg.block {
			c.mu.Unlock()
			return ErrQueueFull
		}
		c.room.Wait()
	}
	if c.cur != nil && !c.cur.fits(len(e.buf)) {
		c.sealLocked(now)
	}
	if c.cur == nil {
		c.cur = c.newBatchLocked()
	}
	c.cur.add(m, e.buf, key)
	c.queued++
	if len(c.cur.refs) >= c.cfg.flushAt {
		c.sealLocked(now)
	}
	c.mu.Unlock()
	return nil
}

// recordKey is the Kafka key of m: userId, else anonymousId.
func recordKey(m Message) string {
	switch m := m.(type) {
	case *Identify:
		return firstNonEmpty(m.UserId, m.AnonymousId)
	case *Track:
		return firstNonEmpty(m.UserId, m.AnonymousId)
	case *Page:
		return firstNonEmpty(m.UserId, m.AnonymousId)
	case *Screen:
		return firstNonEmpty(m.UserId, m.AnonymousId)
	case *Group:
		return firstNonEmpty(m.UserId, m.AnonymousId)
	case *Alias:
		return m.UserId
	}
	return ""
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (c *Client) newBatchLocked() *batch {
	var b *batch
	if n := len(c.free); n > 0 {
		b, c.free = c.free[n-1], c.free[:n-1]
	} else {
		b = newBatch()
	}
	b.res = &result{done: make(chan struct{})}
	return b
}

// sealLocked hands the current batch, if any, to the senders; it is a flush.
func (c *Client) sealLocked(now time.Time) {
	c.lastFlush = now
	b := c.cur
	if b == nil {
		return
	}
	c.cur = nil
	b.res.total = len(b.refs)
	c.pending = append(c.pending, b)
	c.open = append(c.open, b.res)
	c.work.Signal()
}

// Flush sends every message queued before the call and waits until each was delivered or
// given up on, or until ctx is done (then it returns ctx's error; the sending goes on). It
// returns an error wrapping the first failure when some messages were not delivered (each is
// also reported to Callback.Failure), ErrClosed after Close.
func (c *Client) Flush(ctx context.Context) error {
	c.once.Do(c.start)
	if c.err != nil {
		return c.err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.sealLocked(c.clock.Now())
	waits := append([]*result(nil), c.open...)
	c.mu.Unlock()
	for _, r := range waits {
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return outcome(waits)
}

// outcome sums up finished batches: nil when every message was delivered.
func outcome(rs []*result) error {
	var total, failed int
	var first error
	for _, r := range rs {
		total += r.total
		failed += r.failed
		if first == nil {
			first = r.firstErr
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("analytics: %d of %d messages not delivered: %w", failed, total, first)
}

// Close flushes the queue and waits, at most CloseTimeout, for every queued message to be
// delivered or given up on; messages still unsent then fail with ErrClosed. It stops every
// goroutine the client started and closes its connections before it returns. Calls made after
// Close return ErrClosed, and so does a second Close. The error sums up failures as Flush's.
func (c *Client) Close() error {
	c.once.Do(c.start)
	if c.err != nil {
		return c.err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	c.sealLocked(c.clock.Now())
	waits := append([]*result(nil), c.open...)
	c.room.Broadcast() // blocked calls return ErrClosed
	c.mu.Unlock()
	close(c.stop)

	deadline := time.NewTimer(c.cfg.closeTimeout)
	defer deadline.Stop()
	for _, r := range waits {
		select {
		case <-r.done:
			continue
		case <-deadline.C:
		}
		n := 0
		for _, r := range waits {
			select {
			case <-r.done:
			default:
				n += r.total
			}
		}
		c.logf(true, "close: %d messages still unsent after %s; giving them up", n, c.cfg.closeTimeout)
		c.abort() // in-flight sends and waits end at once; the rest fail with ErrClosed
		break
	}
	c.mu.Lock()
	c.stopping = true
	c.work.Broadcast()
	c.mu.Unlock()
	c.wg.Wait()
	c.abort()
	err := c.tr.close()
	if out := outcome(waits); out != nil {
		return out
	}
	if err != nil {
		return fmt.Errorf("analytics: closing: %w", err)
	}
	return nil
}

// start validates the fields and starts the flusher and the senders.
func (c *Client) start() {
	if c.clock == nil {
		c.clock = systemClock{}
	}
	cfg, err := c.resolve()
	if err != nil {
		c.err = err
		return
	}
	c.cfg = cfg
	c.log = resolveLogger(c.Logger)
	if c.Kafka != nil {
		c.tr = newKafkaTransport(c.Kafka, c.writeKey)
	} else {
		c.tr = newHTTPTransport(cfg, c.HTTPClient, c.writeKey)
	}
	c.room.L = &c.mu
	c.work.L = &c.mu
	c.encode.New = func() any {
		return &encoder{buf: make([]byte, 0, 1024), limit: MaxMessageBytes}
	}
	c.ctx, c.abort = context.WithCancel(context.Background())
	c.stop = make(chan struct{})
	c.lastFlush = c.clock.Now()
	c.wg.Add(1 + cfg.concurrency)
	go c.flusher(c.clock.NewTimer(cfg.flushAfter))
	for range cfg.concurrency {
		go c.sender()
	}
}

// resolve applies the defaults and checks every field: the one validation point.
func (c *Client) resolve() (config, error) {
	cfg := config{
		flushAt:       DefaultFlushAt,
		flushAfter:    DefaultFlushAfter,
		queueSize:     DefaultQueueSize,
		block:         c.BlockWhenFull,
		closeTimeout:  DefaultCloseTimeout,
		maxRetries:    DefaultMaxRetries,
		retryInitial:  DefaultRetryInitial,
		retryMax:      DefaultRetryMax,
		concurrency:   1,
		compressAbove: DefaultCompressAbove,
		kafka:         c.Kafka != nil,
	}
	bad := func(field, format string, args ...any) (config, error) {
		return config{}, &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if c.writeKey == "" {
		return bad("writeKey", "empty: pass the source's write key to New")
	}
	if c.Kafka == nil {
		endpoint := c.Endpoint
		if endpoint == "" {
			endpoint = DefaultEndpoint
		}
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("Endpoint", "%q is not an http or https URL", endpoint)
		}
		cfg.url = strings.TrimRight(endpoint, "/") + "/v1/batch"
	} else {
		if len(c.Kafka.Brokers) == 0 {
			return bad("Kafka.Brokers", "empty: give at least one bootstrap server")
		}
	}
	switch {
	case c.FlushAt != 0 && c.Size != 0 && c.FlushAt != c.Size:
		return bad("Size", "FlushAt is %d and Size is %d: they are the same setting, set one", c.FlushAt, c.Size)
	case c.FlushAt != 0:
		cfg.flushAt = c.FlushAt
	case c.Size != 0:
		cfg.flushAt = c.Size
	}
	if cfg.flushAt < 1 || cfg.flushAt > MaxBatchMessages {
		field := "FlushAt"
		if c.FlushAt == 0 {
			field = "Size"
		}
		return bad(field, "%d is not between 1 and %d", cfg.flushAt, MaxBatchMessages)
	}
	if err := positive(&cfg.flushAfter, c.FlushAfter, "FlushAfter"); err != nil {
		return config{}, err
	}
	if err := positive(&cfg.closeTimeout, c.CloseTimeout, "CloseTimeout"); err != nil {
		return config{}, err
	}
	if err := positive(&cfg.retryInitial, c.RetryInitialInterval, "RetryInitialInterval"); err != nil {
		return config{}, err
	}
	if err := positive(&cfg.retryMax, c.RetryMaxInterval, "RetryMaxInterval"); err != nil {
		return config{}, err
	}
	if cfg.retryInitial > cfg.retryMax {
		return bad("RetryInitialInterval", "%s is more than RetryMaxInterval (%s)", cfg.retryInitial, cfg.retryMax)
	}
	switch {
	case c.QueueSize < 0:
		return bad("QueueSize", "%d is negative", c.QueueSize)
	case c.QueueSize > 0:
		cfg.queueSize = c.QueueSize
	}
	if cfg.queueSize < cfg.flushAt {
		return bad("QueueSize", "%d is less than FlushAt (%d)", cfg.queueSize, cfg.flushAt)
	}
	switch {
	case c.MaxRetries < 0:
		cfg.maxRetries = 0
	case c.MaxRetries > 0:
		cfg.maxRetries = c.MaxRetries
	}
	switch {
	case c.MaxConcurrentRequests < 0:
		return bad("MaxConcurrentRequests", "%d is negative", c.MaxConcurrentRequests)
	case c.MaxConcurrentRequests > 0:
		cfg.concurrency = c.MaxConcurrentRequests
	}
	switch {
	case c.CompressAbove < 0:
		cfg.compressAbove = -1
	case c.CompressAbove > 0:
		cfg.compressAbove = c.CompressAbove
	}
	return cfg, nil
}

func positive(dst *time.Duration, v time.Duration, field string) error {
	switch {
	case v < 0:
		return &ConfigError{Field: field, Reason: v.String() + " is negative"}
	case v > 0:
		*dst = v
	}
	return nil
}

// flusher seals the current batch FlushAfter after the last flush.
func (c *Client) flusher(t timer) {
	defer c.wg.Done()
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C():
		}
		c.mu.Lock()
		now := c.clock.Now()
		due := c.lastFlush.Add(c.cfg.flushAfter)
		if !now.Before(due) {
			c.sealLocked(now)
			due = now.Add(c.cfg.flushAfter)
		}
		c.mu.Unlock()
		t.Reset(due.Sub(now))
	}
}

// sender delivers sealed batches until Close tells it to stop and none is left.
func (c *Client) sender() {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		for len(c.pending) == 0 && !c.stopping {
			c.work.Wait()
		}
		if len(c.pending) == 0 {
			c.mu.Unlock()
			return
		}
		b := c.pending[0]
		c.pending[0] = nil
		c.pending = c.pending[1:]
		c.mu.Unlock()

		c.deliver(b)
		c.finish(b)
	}
}

// finish reports the outcome of b to the Callback, releases its room in the queue and wakes
// whoever waits for it.
func (c *Client) finish(b *batch) {
	res := b.res
	for i := range b.refs {
		r := &b.refs[i]
		if r.err != nil {
			res.failed++
			if res.firstErr == nil {
				res.firstErr = r.err
			}
		}
		if c.Callback != nil {
			if r.err != nil {
				c.Callback.Failure(r.msg, r.err)
			} else {
				c.Callback.Success(r.msg)
			}
		}
	}
	c.mu.Lock()
	c.queued -= len(b.refs)
	for i, r := range c.open {
		if r == res {
			c.open = append(c.open[:i], c.open[i+1:]...)
			break
		}
	}
	close(res.done)
	b.reset()
	if len(c.free) < 2*c.cfg.concurrency+2 {
		c.free = append(c.free, b)
	}
	c.room.Broadcast()
	c.mu.Unlock()
}

func (c *Client) logf(isErr bool, format string, args ...any) {
	switch {
	case c.log == nil:
	case isErr:
		c.log.Errorf(format, args...)
	default:
		c.log.Logf(format, args...)
	}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, maxRetryAfter), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter), true
	}
	return 0, false
}

// errClosedWith is the failure of a message abandoned at Close's deadline.
func errClosedWith(last error) error {
	if last == nil || errors.Is(last, context.Canceled) {
		return ErrClosed
	}
	return fmt.Errorf("%w (close deadline passed; last error: %v)", ErrClosed, last)
}
