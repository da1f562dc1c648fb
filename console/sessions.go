package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Sessions (docs/console.md#sessions): a session cookie is signed with a key derived from the
// console token, so every console accepts it until it expires; signing out writes a
// revocation to tributary.sessions, which every console reads (a view rebuilt at start, like
// the others), and a revoked session is refused everywhere from then on. The records are
// keyed by a hash of the session id, so that reading the topic gives no usable cookie, and
// expire with the topic's retention (platform.RetentionSessions, twice a session's life).

// sessionKey is the tributary.sessions key of the session whose id is id.
func sessionKey(id []byte) string {
	sum := sha256.Sum256(id)
	return hex.EncodeToString(sum[:])
}

// sessionView is the revoked sessions that have not expired yet. Safe for concurrent use.
type sessionView struct {
	mu      sync.Mutex
	revoked map[string]time.Time // session key → when the session expires
	// watchers are closed when their session is revoked (open live streams end then).
	watchers map[string]map[chan struct{}]struct{}
	ready    chan struct{}
}

func newSessionView() *sessionView {
	return &sessionView{revoked: map[string]time.Time{}, watchers: map[string]map[chan struct{}]struct{}{}, ready: make(chan struct{})}
}

// revoke records that the session key is signed out until expires.
func (v *sessionView) revoke(key string, expires time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.revoked[key] = expires
	for ch := range v.watchers[key] {
		close(ch)
	}
	delete(v.watchers, key)
}

// forget drops the revocation of key (a tombstone on the topic).
func (v *sessionView) forget(key string) {
	v.mu.Lock()
	delete(v.revoked, key)
	v.mu.Unlock()
}

// valid reports whether the session key may be used: the view has caught up (until then every
// session is refused: a console that has not read the revocations cannot know) and the session
// is not revoked.
func (v *sessionView) valid(key string) bool {
	select {
	case <-v.ready:
	default:
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_, revoked := v.revoked[key]
	return !revoked
}

// watch returns a channel closed when the session key is revoked, and the function that stops
// watching.
func (v *sessionView) watch(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, revoked := v.revoked[key]; revoked {
		close(ch)
		return ch, func() {}
	}
	if v.watchers[key] == nil {
		v.watchers[key] = map[chan struct{}]struct{}{}
	}
	v.watchers[key][ch] = struct{}{}
	return ch, func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if ws, ok := v.watchers[key]; ok {
			delete(ws, ch)
			if len(ws) == 0 {
				delete(v.watchers, key)
			}
		}
	}
}

// prune drops the revocations of sessions that expired by now: their cookies are refused
// anyway.
func (v *sessionView) prune(now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for key, expires := range v.revoked {
		if !now.Before(expires) {
			delete(v.revoked, key)
		}
	}
}

// runSessions keeps the sessions view: tributary.sessions from its start.
func (s *Service) runSessions(ctx context.Context) error {
	return s.runView(ctx, "sessions", s.sessions.ready, platform.TopicReaderConfig{
		Topic: s.cfg.SessionsTopic,
		Apply: func(r *kgo.Record) {
			key := string(r.Key)
			if r.Value == nil {
				s.sessions.forget(key)
				return
			}
			_, expires, err := schemas.DecodeSessionRevocation(r.Value)
			if err != nil {
				s.logger.Warn().Err(err).Str("topic", r.Topic).Int64("offset", r.Offset).Msg("skipping a session revocation that cannot be read")
				return
			}
			if s.now().Before(expires) {
				s.sessions.revoke(key, expires)
			}
		},
	}, nil)
}

// revokeTimeout bounds the write of a revocation.
const revokeTimeout = 10 * time.Second

// revokeSession writes the session's revocation to tributary.sessions and applies it here at
// once; it returns once Kafka has it, so that the other consoles refuse the session too.
func (s *Service) revokeSession(ctx context.Context, sess *session) error {
	ctx, cancel := context.WithTimeout(ctx, revokeTimeout)
	defer cancel()
	rec := schemas.SessionRevocation{RevokedAt: schemas.FormatTimestamp(s.now()), ExpiresAt: schemas.FormatTimestamp(sess.expires)}
	key := sessionKey(sess.id)
	if err := s.producer.ProduceSync(ctx, &kgo.Record{Topic: s.cfg.SessionsTopic, Key: []byte(key), Value: rec.Record()}).FirstErr(); err != nil {
		return fmt.Errorf("writing the revocation to %s: %w", s.cfg.SessionsTopic, err)
	}
	s.sessions.revoke(key, sess.expires)
	return nil
}
