package console

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	ratelimit "golang.org/x/time/rate"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The audit trail (docs/console.md#audit-trail): every change made through the console — config
// objects, imports and re-encryptions, key rotations, regulations, replays, DLQ replays and
// retries — and every sign-in, sign-out and refusal is one schemas.AuditRecord on
// tributary.audit, with who (the request's principal, principal.go), when, what, the object
// before → after with its secrets hashed (schemas.AuditState) and from where.
//
// The change is the source of truth and its audit record follows it: a record is written once
// the change succeeded (Kafka acknowledged it, acks=all) and before the request is answered. If
// the audit write fails, the change stays made: the console logs the whole record at error level
// ("audit record not written", the record in the field audit_record, its secrets hashed) and
// counts tributary_console_audit_write_failures_total, so that no record is lost silently.
// Refusals (a wrong token, a refused sign-in, a role's 403) are recorded at most
// auditRefusalsPerSecond on average per console; those beyond are counted in
// tributary_console_audit_refusals_dropped_total: a client that is not signed in cannot fill the
// topic.

// Audit actions besides "<kind>.create", "<kind>.update" and "<kind>.delete" of config objects.
const (
	actionRotateKey        = "source.rotate-key"
	actionImport           = "config.import"
	actionReencrypt        = "config.reencrypt"
	actionRegulationCreate = "regulation.create"
	actionReplayCreate     = "replay.create"
	actionReplayCancel     = "replay.cancel"
	actionDLQReplay        = "dlq.replay"
	actionPendingRetry     = "pending.retry"
	actionSignIn           = "session.sign-in"
	actionSignInRefused    = "session.sign-in-refused"
	actionSignOut          = "session.sign-out"
	actionUnauthorized     = "api.unauthorized"
	actionForbidden        = "access.forbidden"
)

// Refusals recorded: auditRefusalsPerSecond on average, bursts of auditRefusalsBurst.
const (
	auditRefusalsPerSecond = 10
	auditRefusalsBurst     = 100
	// auditWriteTimeout bounds an audit record's write (the request's own cancellation does
	// not stop it: the change it records was made).
	auditWriteTimeout = 10 * time.Second
)

// auditTrail is the console's audit trail: its writer's metrics and limiter, and the view of the
// recent records (audit_reader.go).
type auditTrail struct {
	view     *views.Audit
	ready    chan struct{} // closed once the view caught up
	refusals *ratelimit.Limiter
	failures prometheus.Counter
	dropped  prometheus.Counter
}

func newAuditTrail(window int, reg prometheus.Registerer) *auditTrail {
	a := &auditTrail{view: views.NewAudit(window), ready: make(chan struct{}),
		refusals: ratelimit.NewLimiter(auditRefusalsPerSecond, auditRefusalsBurst),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_audit_write_failures_total",
			Help: "Audit records the console could not write to tributary.audit (each logged in full)."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_console_audit_refusals_dropped_total",
			Help: "Refusals (wrong tokens, refused sign-ins) beyond the audit trail's rate, not recorded."}),
	}
	reg.MustRegister(a.failures, a.dropped)
	return a
}

type auditOriginKey struct{}
type auditActionKey struct{}

// auditOrigin is where a request came from, and whether it is an API request (its principal
// holds a bearer token) or the UI's (a signed-in session).
type auditOrigin struct {
	from schemas.AuditFrom
	api  bool
}

// withAuditOrigin wraps the console's handler: every request's context carries where it came
// from (schemas.AuditFrom), for its audit records.
func withAuditOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := auditOrigin{from: requestOrigin(r), api: strings.HasPrefix(r.URL.Path, "/v1/")}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), auditOriginKey{}, o)))
	})
}

// requestOrigin is where r came from: its peer's address, the X-Forwarded-For header as sent
// (not trusted: recorded beside the peer), its User-Agent; each bounded.
func requestOrigin(r *http.Request) schemas.AuditFrom {
	ip := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		ip = host
	}
	return schemas.AuditFrom{IP: clip(ip, 64), ForwardedFor: clip(r.Header.Get("X-Forwarded-For"), 256), UserAgent: clip(r.UserAgent(), 256)}
}

func clip(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "")
	}
	return s
}

// withAuditAction returns ctx whose config writes are recorded as action (config.import,
// source.rotate-key, ...) rather than as the create, update or delete of each object.
func withAuditAction(ctx context.Context, action string) context.Context {
	return context.WithValue(ctx, auditActionKey{}, action)
}

// auditActor is who acts in ctx: its principal, or the console itself when there is none.
func auditActor(ctx context.Context) schemas.AuditActor {
	p, ok := principalOf(ctx)
	if !ok {
		return schemas.AuditActor{Name: "console", Kind: schemas.ActorSystem}
	}
	o, _ := ctx.Value(auditOriginKey{}).(auditOrigin)
	return actorOf(p, o.api)
}

// actorOf is the audit actor of p: CONSOLE_TOKEN's holder; else, on the API (api), an API
// token, and on the UI a person signed in.
func actorOf(p Principal, api bool) schemas.AuditActor {
	kind := schemas.ActorUser
	switch {
	case p == tokenPrincipal:
		kind = schemas.ActorConsoleToken
	case api:
		kind = schemas.ActorAPIToken
	}
	return schemas.AuditActor{Name: p.Name, Role: string(p.Role), Kind: kind}
}

// audit records action on obj by ctx's principal, before → after (objects, hashed by
// schemas.AuditState; nil: none), done.
func (s *Service) audit(ctx context.Context, action string, obj schemas.AuditObject, before, after any) {
	s.auditRecord(ctx, auditActor(ctx), action, obj, before, after, schemas.AuditResult{Status: schemas.AuditOK})
}

// auditRefusal records a refused action (a wrong token, a refused sign-in) by actor, within
// the refusals' rate.
func (s *Service) auditRefusal(ctx context.Context, actor schemas.AuditActor, action string, obj schemas.AuditObject, reason string) {
	if s.auditTrail == nil {
		return // a Service not made by New (a unit test of a handler)
	}
	if !s.auditTrail.refusals.Allow() {
		s.auditTrail.dropped.Inc()
		return
	}
	s.auditRecord(ctx, actor, action, obj, nil, nil, schemas.AuditResult{Status: schemas.AuditRefused, Reason: reason})
}

// auditRecord writes one record; a failure is logged (with the record) and counted.
func (s *Service) auditRecord(ctx context.Context, actor schemas.AuditActor, action string, obj schemas.AuditObject, before, after any, result schemas.AuditResult) {
	if s.auditTrail == nil {
		return // a Service not made by New (a unit test of a handler)
	}
	rec := schemas.AuditRecord{V: schemas.AuditVersion, ID: uuid.NewString(), Time: schemas.FormatTimestamp(s.now()),
		Actor: actor, Action: action, Object: obj, Result: result}
	o, _ := ctx.Value(auditOriginKey{}).(auditOrigin)
	rec.From = o.from
	var err error
	if rec.Before, err = schemas.AuditState(before); err == nil {
		rec.After, err = schemas.AuditState(after)
	}
	var value []byte
	if err == nil {
		value, err = rec.Encode() // a large object's before and after: their digests
	}
	if err == nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditWriteTimeout)
		err = s.producer.ProduceSync(wctx, &kgo.Record{Topic: s.cfg.AuditTopic, Key: []byte(actor.Name), Value: value}).FirstErr()
		cancel()
	}
	if err != nil {
		s.auditTrail.failures.Inc()
		ev := s.logger.Error().Err(err).Str("action", action)
		if value != nil {
			ev = ev.RawJSON("audit_record", value)
		}
		ev.Msg("audit record not written")
	}
}

// auditWrites records config writes: objs, just written (acknowledged), against before, the
// config they changed. Each object is one record: ctx's action (withAuditAction), else
// "<kind>.create", "<kind>.update" or "<kind>.delete".
func (s *Service) auditWrites(ctx context.Context, before *platform.Snapshot, objs []schemas.ConfigObject) {
	action, _ := ctx.Value(auditActionKey{}).(string)
	for _, o := range objs {
		prev, existed := lookup(before, o.Kind, o.ID)
		act := action
		if act == "" {
			act = schemas.AuditConfigAction(o.Kind, existed, o.Deleted())
		}
		var b, a any
		if existed {
			b = prev.Value()
		}
		if !o.Deleted() {
			a = o.Value()
		}
		s.audit(ctx, act, schemas.AuditObject{Kind: schemas.AuditKind(o.Kind), ID: o.ID}, b, a)
	}
}

// auditSession records a session's sign-in or sign-out (action) for p; cookie is the session's
// cookie value, whose session key (sessions.go) names the session: its first 16 digits.
func (s *Service) auditSession(ctx context.Context, action string, p Principal, cookie string) {
	s.auditRecord(ctx, actorOf(p, false), action, schemas.AuditObject{Kind: "session", ID: cookieSessionID(cookie)}, nil, nil,
		schemas.AuditResult{Status: schemas.AuditOK})
}

// cookieSessionID is the id the audit trail gives the session of a cookie value: the first 16
// hex digits of its session key, as tributary.sessions names it; "" for a value that is not a
// session's.
func cookieSessionID(cookie string) string {
	p, _, _ := strings.Cut(cookie, ".")
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil || len(payload) < 24 {
		return ""
	}
	return sessionKey(payload[8:24])[:16]
}

// auditRefusedToken records an API request refused for its bearer token.
func (s *Service) auditRefusedToken(r *http.Request) {
	s.auditRefusal(r.Context(), schemas.AuditActor{Name: "unknown", Kind: schemas.ActorAPIToken}, actionUnauthorized,
		schemas.AuditObject{Kind: "request", ID: clip(r.Method+" "+r.URL.Path, 256)}, "missing or wrong bearer token")
}

// auditSent is the after of a DLQ replay or a retry now: the messages sent (and, for a replay,
// to which other URL, and how many were skipped).
type auditSent struct {
	URL        string   `json:"url,omitempty"`
	MessageIDs []string `json:"messageIds"`
	Skipped    int      `json:"skipped,omitempty"`
}

// auditRegulation records a regulation: its type, how many subjects and which sources, never
// the subjects' user ids (the audit trail outlives the data a deletion removes).
func (s *Service) auditRegulation(ctx context.Context, id, regulationType string, subjects int, sourceIDs []string) {
	s.audit(ctx, actionRegulationCreate, schemas.AuditObject{Kind: "regulation", ID: id}, nil, map[string]any{
		"regulationType": regulationType, "subjects": subjects, "sourceIds": sourceIDs})
}

// auditReplayCancelled records the cancellation of the replay p (its state after).
func (s *Service) auditReplayCancelled(ctx context.Context, p *replay) {
	s.audit(ctx, actionReplayCancel, schemas.AuditObject{Kind: "replay", ID: p.ID}, nil, p.view())
}

// auditSignInRefused records a refused sign-in to the UI, for reason: with the console token,
// or with single sign-on (sso: the actor is a person).
func (s *Service) auditSignInRefused(ctx context.Context, sso bool, reason string) {
	kind := schemas.ActorConsoleToken
	if sso {
		kind = schemas.ActorUser
	}
	s.auditRefusal(ctx, schemas.AuditActor{Name: "unknown", Kind: kind}, actionSignInRefused,
		schemas.AuditObject{Kind: "session"}, reason)
}

// auditSignOut records the end of the session sess by ctx's principal.
func (s *Service) auditSignOut(ctx context.Context, sess *session) {
	s.audit(ctx, actionSignOut, schemas.AuditObject{Kind: "session", ID: sess.key[:16]}, nil, nil)
}

// auditForbidden records a request refused for its principal's role (403): the API route or
// page of pattern needs need.
func (s *Service) auditForbidden(r *http.Request, pattern string, need Role) {
	s.auditRefusal(r.Context(), auditActor(r.Context()), actionForbidden, schemas.AuditObject{Kind: "request", ID: clip(pattern, 256)},
		"needs the role "+string(need))
}
