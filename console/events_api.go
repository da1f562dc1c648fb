package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/views"
)

// The source debugger's API: a source's recent events, and its live stream (Server-Sent
// Events) within the stream limits (docs/console.md#live-stream-limits).

// recentEvents answers the source's last events, newest first; masked without the PII grant
// (docs/console.md#pii-access), as the live stream's are.
func (s *Service) recentEvents(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().SourceByID(id); !ok {
		return errNotFound("no source %q", id)
	}
	writeData(w, http.StatusOK, s.maskOf(r).events(s.events.Recent(id, -1)))
	return nil
}

// sseHeartbeat is how often an idle stream sends a comment, so proxies keep it open.
const sseHeartbeat = 15 * time.Second

// liveEvents streams the source's events as Server-Sent Events (text/event-stream) as they
// arrive: "event: accepted" or "event: rejected", "id:", and the event's JSON as data. Beyond the
// stream limits it answers 429 with the error body.
func (s *Service) liveEvents(w http.ResponseWriter, r *http.Request) error {
	return s.streamEvents(w, r, apiStreamClient, false)
}

// streamEvents is the live stream of the source r names, for client. Beyond the stream limits
// it answers 429 with the error body, or, with refuseInStream (the UI's EventSource, which
// shows no error body), a stream of one "event: refused" whose data is the error, and no
// reconnection for a minute. Every write has a deadline (StreamWriteTimeout): a client that
// stops reading is dropped, and the stream's goroutine ends.
func (s *Service) streamEvents(w http.ResponseWriter, r *http.Request, client string, refuseInStream bool) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().SourceByID(id); !ok {
		return errNotFound("no source %q", id)
	}
	rc := http.NewResponseController(w)
	// write sends one piece of the stream and flushes it, within the write deadline.
	write := func(format string, args ...any) error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	h := w.Header()
	release, refused := s.streams.acquire(client)
	if refused != nil {
		s.metrics.streamsRefused.Inc()
		if !refuseInStream {
			w.Header().Set("Retry-After", "5")
			return refused
		}
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		b, _ := json.Marshal(refused)
		_ = write("retry: 60000\nevent: refused\ndata: %s\n\n", b)
		return nil
	}
	defer release()
	mask := s.maskOf(r)
	ch := make(chan views.EventView, 256)
	unwatch := s.events.Watch(id, ch)
	s.metrics.liveStreams.Inc()
	defer func() {
		unwatch()
		s.metrics.liveStreams.Dec()
	}()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := write("retry: 2000\n: watching source %s\n\n", id); err != nil {
		return nil
	}
	beat := time.NewTicker(sseHeartbeat)
	defer beat.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return nil
		case <-s.stopping:
			return nil
		case <-beat.C:
			err = write(": keep-alive\n\n")
		case v := <-ch:
			b, _ := json.Marshal(mask.event(v))
			err = write("event: %s\nid: %s\ndata: %s\n\n", v.Status, v.ID, b)
		}
		if err != nil {
			return nil // the client went away, or stopped reading
		}
	}
}
