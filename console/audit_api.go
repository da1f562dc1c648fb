package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The audit trail's API (docs/console.md#audit-trail): GET /v1/audit pages through the recent
// records (the view's window, newest first), GET /v1/audit/export streams every record of a time
// range from the topic as JSON lines.

// auditFilterOf reads the filters of a query: actor, action, kind, id, since, until (RFC 3339).
func auditFilterOf(q url.Values) (views.AuditFilter, error) {
	f := views.AuditFilter{Actor: q.Get("actor"), Action: q.Get("action"), Kind: q.Get("kind"), ID: q.Get("id")}
	var err error
	if f.Since, err = auditTime(q, "since"); err != nil {
		return f, err
	}
	if f.Until, err = auditTime(q, "until"); err != nil {
		return f, err
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, errInvalid("until", "until: must be after since")
	}
	return f, nil
}

// auditTime reads the time parameter name: RFC 3339 (a date alone is its midnight UTC); zero
// when absent.
func auditTime(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	t, err := schemas.ParseTimestamp(v)
	if err != nil {
		return time.Time{}, errInvalid(name, "%s: not an RFC 3339 time (2026-01-02T15:04:05Z) nor a date (2026-01-02): %q", name, v)
	}
	return t, nil
}

// auditPage is an answer of GET /v1/audit.
type auditPage struct {
	Data []schemas.AuditRecord `json:"data"`
	// Next is the cursor of the next (older) page; absent on the last.
	Next string `json:"nextCursor,omitempty"`
}

// auditQuery answers a page of the recent audit records.
func (s *Service) auditQuery(r *http.Request) (auditPage, views.AuditFilter, error) {
	q := r.URL.Query()
	f, err := auditFilterOf(q)
	if err != nil {
		return auditPage{}, f, err
	}
	limit, err := pageLimit(r, 100)
	if err != nil {
		return auditPage{}, f, err
	}
	before := int64(-1)
	if c := q.Get("cursor"); c != "" {
		if before, err = strconv.ParseInt(c, 10, 64); err != nil || before < 0 {
			return auditPage{}, f, errInvalid("cursor", "cursor: not a cursor of this API: %q", c)
		}
	}
	recs, next := s.auditTrail.view.Page(f, before, limit)
	p := auditPage{Data: recs}
	if next >= 0 {
		p.Next = strconv.FormatInt(next, 10)
	}
	return p, f, nil
}

func (s *Service) listAudit(w http.ResponseWriter, r *http.Request) error {
	p, _, err := s.auditQuery(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// exportAudit streams the records of [since, until) from tributary.audit, oldest first, one JSON
// object per line (application/jsonl), the filters of GET /v1/audit applied: what the topic
// still holds, not only the view's window. It reads the records written before the request and
// ends.
func (s *Service) exportAudit(w http.ResponseWriter, r *http.Request) error {
	f, err := auditFilterOf(r.URL.Query())
	if err != nil {
		return err
	}
	started := false
	enc := json.NewEncoder(w)
	var werr error
	cfg := platform.TopicReaderConfig{Kafka: s.deps.Kafka, Topic: s.cfg.AuditTopic, Logger: s.logger, ReadCommitted: true,
		Opts: append([]kgo.Opt{kgo.FetchMaxWait(platform.ConfigFetchMaxWait)}, s.deps.KafkaOpts...),
		Apply: func(rec *kgo.Record) {
			if werr != nil {
				return
			}
			a, err := schemas.DecodeAuditRecord(rec.Value)
			if err != nil {
				return // logged by the view
			}
			at, _ := schemas.ParseTimestamp(a.Time)
			if !f.Match(&a, at) {
				return
			}
			if !started {
				started = true
				exportHeaders(w)
			}
			werr = enc.Encode(&a)
		},
	}
	if !f.Since.IsZero() {
		// Records are written as they are made: none made at since was written much before.
		cfg.Start = platform.StartAfter(f.Since.Add(-time.Minute))
	}
	rd, err := platform.NewTopicReader(cfg)
	if err != nil {
		return err
	}
	if err := rd.Run(r.Context()); err != nil {
		if started {
			s.logger.Error().Err(err).Msg("exporting the audit trail failed midway")
			return nil // the status is sent: the stream ends short
		}
		return err
	}
	if !started {
		exportHeaders(w)
	}
	return nil
}

func exportHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="tributary-audit.jsonl"`)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
