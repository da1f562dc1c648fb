package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// maxBodyBytes caps what one webhook may be. A delivered body is one message (at most
// schemas.MaxMessageBytes as ingest accepted it) plus "version":1 and, on alias, two keys:
// 1 MiB leaves ample room.
const maxBodyBytes = 1 << 20

// config is the receiver's settings, read from the environment (see the command's doc) with
// platform.FromEnv, as every Tributary command reads its own.
type config struct {
	Addr                 string        `env:"RECEIVER_ADDR"`
	SharedSecret         string        `env:"RECEIVER_SHARED_SECRET"`
	PreviousSharedSecret string        `env:"RECEIVER_PREVIOUS_SHARED_SECRET"`
	StandardWebhooks     bool          `env:"RECEIVER_STANDARD_WEBHOOKS"`
	TimestampTolerance   time.Duration `env:"RECEIVER_TIMESTAMP_TOLERANCE"`
	DedupSize            int           `env:"RECEIVER_DEDUP_SIZE"`
	Delay                time.Duration `env:"RECEIVER_DELAY"`
}

// loadConfig reads environ, or the process environment when environ is nil, over the defaults,
// and validates it. Errors name the variable.
func loadConfig(environ map[string]string) (config, error) {
	cfg := config{Addr: "127.0.0.1:9000", TimestampTolerance: 5 * time.Minute, DedupSize: 100000}
	if err := platform.FromEnv(&cfg, environ); err != nil {
		return config{}, err
	}
	return cfg, cfg.validate()
}

func (c config) validate() error {
	switch {
	case c.StandardWebhooks && c.SharedSecret == "":
		return errors.New("RECEIVER_STANDARD_WEBHOOKS needs RECEIVER_SHARED_SECRET")
	case c.PreviousSharedSecret != "" && c.SharedSecret == "":
		return errors.New("RECEIVER_PREVIOUS_SHARED_SECRET needs RECEIVER_SHARED_SECRET")
	case c.TimestampTolerance <= 0:
		return fmt.Errorf("RECEIVER_TIMESTAMP_TOLERANCE: %s is not positive", c.TimestampTolerance)
	case c.DedupSize < 1:
		return fmt.Errorf("RECEIVER_DEDUP_SIZE: %d is not positive", c.DedupSize)
	case c.Delay < 0:
		return fmt.Errorf("RECEIVER_DELAY: %s is negative", c.Delay)
	}
	return nil
}

// Values of the "verify" log field.
const (
	verifyNone     = "none"
	verifyX        = "x-signature"
	verifyStandard = "standard-webhooks"
)

// verifyMode names what the receiver checks.
func (c config) verifyMode() string {
	switch {
	case c.SharedSecret == "":
		return verifyNone
	case c.StandardWebhooks:
		return verifyStandard
	default:
		return verifyX
	}
}

// secrets are the secrets a signature may be made with: the current one, then the previous
// one during a rotation.
func (c config) secrets() []string {
	var s []string
	for _, v := range []string{c.SharedSecret, c.PreviousSharedSecret} {
		if v != "" {
			s = append(s, v)
		}
	}
	return s
}

// newServer returns the receiver's HTTP server: the webhook handler on every path, next to
// /healthz, /readyz and /metrics.
func newServer(cfg config, logger zerolog.Logger) *platform.HTTPServer {
	return platform.NewHTTPServer(cfg.Addr, newHandler(cfg, logger), nil, nil, logger)
}

// handler verifies, de-duplicates and logs webhooks. It is safe for concurrent use.
type handler struct {
	mode      string
	secrets   []string
	tolerance time.Duration
	now       func() time.Time
	seen      *idSet
	logger    zerolog.Logger
	delay     time.Duration
}

func newHandler(cfg config, logger zerolog.Logger) *handler {
	return &handler{
		mode:      cfg.verifyMode(),
		secrets:   cfg.secrets(),
		tolerance: cfg.TimestampTolerance,
		now:       time.Now,
		seen:      newIDSet(cfg.DedupSize),
		logger:    logger,
		delay:     cfg.Delay,
	}
}

// webhookFields are the members of a body that the log shows. Only these are decoded; the
// rest of the body (traits, properties, context) is never logged.
type webhookFields struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
	UserID    string `json:"userId"`
	Event     string `json:"event"`
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "webhooks are POSTed", http.StatusMethodNotAllowed)
		return
	}
	// The signature is over these exact bytes: read them raw, verify, and only then decode.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			h.refuse(w, r, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		h.refuse(w, r, http.StatusBadRequest, "reading body")
		return
	}
	// The id to de-duplicate by. With Standard Webhooks it is webhook-id, which the signature
	// covers; X-Signature covers only the body, so X-Message-Id is taken on trust.
	id := r.Header.Get(schemas.HeaderXMessageID)
	if err := h.verify(r.Header, body); err != nil {
		h.refuse(w, r, http.StatusUnauthorized, err.Error())
		return
	}
	if h.mode == verifyStandard {
		id = r.Header.Get(schemas.HeaderWebhookID)
	}
	var f webhookFields
	if err := json.Unmarshal(body, &f); err != nil {
		h.refuse(w, r, http.StatusBadRequest, "body is not a webhook JSON object")
		return
	}
	if id == "" {
		id = f.MessageID
	}
	if h.delay > 0 { // a slow endpoint, on purpose
		select {
		case <-time.After(h.delay):
		case <-r.Context().Done():
			return
		}
	}
	duplicate := id != "" && !h.seen.Add(id)
	h.logger.Info().Str("path", r.URL.Path).Str("type", f.Type).Str("message_id", id).
		Str("user_id", f.UserID).Str("event", f.Event).Str("verify", h.mode).
		Bool("signature_ok", h.mode != verifyNone).Bool("duplicate", duplicate).
		Int("status", http.StatusOK).Msg("webhook")
	w.WriteHeader(http.StatusOK)
}

// refuse answers status and logs why, without the body.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, reason string) {
	h.logger.Warn().Str("path", r.URL.Path).Str("message_id", r.Header.Get(schemas.HeaderXMessageID)).
		Str("verify", h.mode).Bool("signature_ok", false).Str("reason", reason).
		Int("status", status).Msg("webhook refused")
	http.Error(w, reason, status)
}

// verify checks the signature that the receiver's mode calls for.
func (h *handler) verify(hd http.Header, body []byte) error {
	switch h.mode {
	case verifyX:
		sig := hd.Get(schemas.HeaderXSignature)
		if sig == "" {
			return errors.New("missing X-Signature")
		}
		for _, s := range h.secrets {
			if schemas.VerifyXSignature(s, body, sig) {
				return nil
			}
		}
		return errors.New("bad X-Signature")
	case verifyStandard:
		id, ts, sig := hd.Get(schemas.HeaderWebhookID), hd.Get(schemas.HeaderWebhookTimestamp), hd.Get(schemas.HeaderWebhookSignature)
		if id == "" || ts == "" || sig == "" {
			return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return errors.New("webhook-timestamp is not Unix seconds")
		}
		// Refuse what was signed long ago (a replay) or in the future; both directions, as
		// the clocks of sender and receiver may disagree either way.
		if skew := h.now().Sub(time.Unix(sec, 0)); skew > h.tolerance || skew < -h.tolerance {
			return fmt.Errorf("webhook-timestamp %s off the clock (tolerance %s)", skew.Round(time.Second), h.tolerance)
		}
		for _, s := range h.secrets {
			if schemas.VerifyStandardWebhooks(s, id, sec, body, sig) {
				return nil
			}
		}
		return errors.New("bad webhook-signature")
	}
	return nil
}

// idSet remembers the last n ids added and forgets the oldest first, so memory stays bounded
// however long the receiver runs. Safe for concurrent use.
type idSet struct {
	mu   sync.Mutex
	ids  map[string]struct{}
	ring []string // insertion order; ring[next] is the oldest once full
	next int
}

func newIDSet(n int) *idSet {
	return &idSet{ids: make(map[string]struct{}), ring: make([]string, 0, n)}
}

// Add records id and reports whether it was new.
func (s *idSet) Add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; ok {
		return false
	}
	if len(s.ring) < cap(s.ring) {
		s.ring = append(s.ring, id)
	} else {
		delete(s.ids, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % len(s.ring)
	}
	s.ids[id] = struct{}{}
	return true
}
