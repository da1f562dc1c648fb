package deliverer

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Auto-disable (docs/delivery.md#auto-disable): a destination with settings.autoDisable whose
// attempts have all failed for autoDisable.after — counted from the first failed attempt after
// its last delivered message — is disabled: this deliverer writes it to tributary.config with
// enabled: false and autoDisabled set, as the console's write path does. Notices go out at 50 %,
// 90 % and 100 % of the budget: a log line, a tributary.notices record and a signed POST to
// OPERATOR_WEBHOOK_URL. While it is auto-disabled its deliveries (the router still writes them)
// are parked on webhooks.parked; once it is enabled again (console, API or config file) the
// deliverer that owns partition 0 of webhooks.deliveries re-enqueues them, in order, with
// platform.ReplayDeadLetters over webhooks.parked.

// autoTick is how often the failing destinations are looked at.
const autoTick = 250 * time.Millisecond

// parkedRecheck is how often the owner of partition 0 looks for parked deliveries of enabled
// destinations even when the config did not change (a record parked by a deliverer that had
// not yet seen the destination enabled).
const parkedRecheck = time.Minute

// noticePercents are the shares of the budget that make a notice.
var noticePercents = []int{50, 90, 100}

// reasonAutoDisabled is the reason header of a parked delivery.
const reasonAutoDisabled = "destination_auto_disabled"

// failStreaks are the destinations whose attempts have failed since their last delivery, as
// this deliverer sees them.
type failStreaks struct {
	mu sync.Mutex
	m  map[string]*failStreak
}

type failStreak struct {
	since    time.Time // the first failed attempt after the last delivered message
	notified int       // the highest percent noticed in this streak
}

// failed records a failed attempt of destID at now.
func (f *failStreaks) failed(destID string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m[destID] == nil {
		f.m[destID] = &failStreak{since: now}
	}
}

// delivered ends destID's streak: the budget starts again at its next failure.
func (f *failStreaks) delivered(destID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, destID)
}

// due returns, for each streak, the notices it owes at now under the budgets after gives
// (0: the destination has no auto-disable, its streak is forgotten), late by lag(budget) (the
// other deliverers wait a little for the notice of the first, see autoLoop), and marks them
// made.
func (f *failStreaks) due(now time.Time, after func(destID string) time.Duration, lag func(budget time.Duration) time.Duration) map[string]dueNotice {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]dueNotice{}
	for id, st := range f.m {
		budget := after(id)
		if budget <= 0 {
			delete(f.m, id)
			continue
		}
		used := now.Sub(st.since) - lag(budget)
		for _, pct := range noticePercents {
			if pct > st.notified && used >= budget*time.Duration(pct)/100 {
				st.notified = pct
				out[id] = dueNotice{since: st.since, budget: budget, percent: pct}
			}
		}
		if st.notified == 100 {
			delete(f.m, id) // disabled: a new streak starts once it is enabled and fails again
		}
	}
	return out
}

// again makes the notice n of destID due again at the next look (its disable failed): the
// streak it was made for is kept, also over one a failure began since.
func (f *failStreaks) again(destID string, n dueNotice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.m[destID]; st == nil || st.since.After(n.since) {
		f.m[destID] = &failStreak{since: n.since, notified: n.percent - 1}
	}
}

type dueNotice struct {
	since   time.Time
	budget  time.Duration
	percent int
}

// autoLoop runs auto-disable until ctx is done. It runs in a goroutine s.wg counts.
func (s *Service) autoLoop(ctx context.Context) {
	t := time.NewTicker(autoTick)
	defer t.Stop()
	var lastVersion uint64
	var lastCheck time.Time
	var lastEnds string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := s.now()
		snap := s.deps.Config()
		// The owner of partition 0 of webhooks.deliveries makes its notices on time; the other
		// deliverers a little later, and only those it has not made meanwhile (seenNotice):
		// with the endpoint down for everyone, every deliverer's streak reaches each threshold
		// at about the same time, and one notice (and one disable) is enough.
		first := s.track.genOf(partKey{s.cfg.DeliveriesTopic, 0}) != 0
		lag := func(budget time.Duration) time.Duration {
			if first {
				return 0
			}
			return min(noticeLag, budget/10)
		}
		for id, n := range s.streaks.due(now, func(id string) time.Duration {
			d, ok := snap.DestinationByID(id)
			if !ok || !d.IsEnabled() || d.Settings.AutoDisable == nil {
				return 0
			}
			return time.Duration(d.Settings.AutoDisable.After)
		}, lag) {
			if s.seen.covers(id, n) {
				continue
			}
			s.notice(ctx, id, n, now)
		}
		// The parked deliveries of destinations enabled again: re-enqueued by one deliverer,
		// the owner of partition 0 of webhooks.deliveries.
		if !first {
			lastVersion, lastEnds = 0, ""
			continue
		}
		v := versionOf(snap)
		if v != 0 && v == lastVersion && now.Sub(lastCheck) < parkedRecheck {
			continue
		}
		// webhooks.parked is read only when it holds records, and again only when the config
		// changed or more were parked since.
		ends, held, err := s.parkedEnds(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Warn().Err(err).Str("topic", s.cfg.AutoDisable.ParkedTopic).Msg("auto-disable: listing the parked deliveries: tried again in a minute, or at the next config change")
			}
			lastVersion, lastCheck = v, now
			continue
		}
		if held && (v != lastVersion || v == 0 || ends != lastEnds) {
			if err := s.unpark(ctx, snap); err != nil {
				if ctx.Err() == nil {
					s.logger.Warn().Err(err).Msg("re-enqueuing the parked deliveries of enabled destinations: tried again")
				}
				continue
			}
		}
		lastVersion, lastCheck, lastEnds = v, now, ends
	}
}

// parkedEnds lists webhooks.parked's end offsets (as one string, to compare) and says whether
// any partition holds records.
func (s *Service) parkedEnds(ctx context.Context) (string, bool, error) {
	adm := kadm.NewClient(s.cl)
	topic := s.cfg.AutoDisable.ParkedTopic
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return "", false, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return "", false, err
	}
	var parts []string
	anyRecords := false
	ends.Each(func(o kadm.ListedOffset) {
		parts = append(parts, fmt.Sprintf("%d:%d", o.Partition, o.Offset))
		if st, ok := starts.Lookup(o.Topic, o.Partition); ok && st.Offset < o.Offset {
			anyRecords = true
		}
	})
	slices.Sort(parts)
	return strings.Join(parts, " "), anyRecords, nil
}

// versionOf is the config snapshot's version, or 0 when it has none.
func versionOf(snap Destinations) uint64 {
	if v, ok := snap.(interface{ Version() uint64 }); ok {
		return v.Version()
	}
	return 0
}

// noticeLag is the most the deliverers other than the owner of partition 0 of
// webhooks.deliveries wait past a threshold before they make its notice themselves.
const noticeLag = 5 * time.Second

// seenNotices are the latest notice of each destination in tributary.notices, whoever made it.
type seenNotices struct {
	mu sync.Mutex
	m  map[string]schemas.Notice
}

func (sn *seenNotices) add(n schemas.Notice) {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if old, ok := sn.m[n.DestinationID]; !ok || old.At <= n.At {
		sn.m[n.DestinationID] = n
	}
}

// covers says whether a notice of destination id made since the streak of n began already
// says as much (its percent at least n's).
func (sn *seenNotices) covers(id string, n dueNotice) bool {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	seen, ok := sn.m[id]
	if !ok || seen.Percent < n.percent {
		return false
	}
	at, err := schemas.ParseTimestamp(seen.At)
	return err == nil && !at.Before(n.since)
}

// runNotices creates auto-disable's topics when they are missing (an upgrade whose topic
// bootstrap has not run yet), then follows tributary.notices into s.seen until ctx is done.
func (s *Service) runNotices(ctx context.Context) {
	specs := platform.AutoDisableTopics(s.deps.Kafka.Partitions)
	cfg := s.cfg.AutoDisable
	for i, name := range []string{cfg.ParkedTopic, cfg.ParkedReplayedTopic, cfg.NoticesTopic} {
		specs[i].Name = name
	}
	if err := platform.EnsureTopics(ctx, kadm.NewClient(s.cl), s.deps.Kafka.ReplicationFactor, specs); err != nil && ctx.Err() == nil {
		// Without the right to create topics (the topic bootstrap made them), the rest works.
		s.logger.Warn().Err(err).Msg("auto-disable: ensuring its topics")
	}
	r, err := platform.NewTopicReader(platform.TopicReaderConfig{
		Kafka: s.deps.Kafka, Topic: s.cfg.AutoDisable.NoticesTopic, Follow: true, Retry: true,
		Opts:   append([]kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)}, s.deps.KafkaOpts...),
		Logger: s.logger,
		Apply: func(r *kgo.Record) {
			if n, err := schemas.ParseNotice(r.Value); err == nil && n.DestinationID != "" {
				s.seen.add(n)
			}
		},
	})
	if err == nil {
		err = r.Run(ctx)
	}
	if err != nil && ctx.Err() == nil {
		s.logger.Warn().Err(err).Str("topic", s.cfg.AutoDisable.NoticesTopic).Msg("auto-disable: reading the notices stopped: each deliverer makes its own from now on")
	}
}

// notice makes one notice of destination id: at 100 % it disables it first (and makes no
// notice if another deliverer, or an operator, disabled it meanwhile).
func (s *Service) notice(ctx context.Context, id string, n dueNotice, now time.Time) {
	typ := schemas.NoticeDestinationFailing
	if n.percent == 100 {
		typ = schemas.NoticeDestinationDisabled
		wrote, err := s.disable(ctx, id, n, now)
		if err != nil {
			s.logger.Error().Err(err).Str("destination", id).Msg("auto-disable: writing the destination disabled: tried again")
			s.streaks.again(id, n)
			return
		}
		if !wrote {
			return
		}
	}
	since := schemas.FormatTimestamp(n.since)
	nt := schemas.Notice{
		ID:   id + "/" + since + "/" + strconv.Itoa(n.percent),
		Type: typ, DestinationID: id, Percent: n.percent, FailingSince: since,
		After: schemas.ShortDuration(n.budget), DisableAt: schemas.FormatTimestamp(n.since.Add(n.budget)),
		At: schemas.FormatTimestamp(now),
	}
	ev := s.logger.Warn()
	msg := "destination failing: auto-disable budget partly used"
	if n.percent == 100 {
		ev, msg = s.logger.Error(), "destination auto-disabled: its deliveries are parked until it is enabled again"
	}
	ev.Str("destination", id).Str("notice", typ).Int("percent", n.percent).Str("failing_since", since).
		Str("after", nt.After).Str("disable_at", nt.DisableAt).Msg(msg)
	body := nt.Record()
	s.cl.Produce(s.grace, &kgo.Record{Topic: s.cfg.AutoDisable.NoticesTopic, Key: []byte(id), Value: body}, func(_ *kgo.Record, err error) {
		if err != nil {
			s.logger.Warn().Err(err).Str("destination", id).Str("topic", s.cfg.AutoDisable.NoticesTopic).Msg("auto-disable: producing a notice")
		}
	})
	if s.cfg.AutoDisable.OperatorWebhookURL != "" {
		s.spawn(func() { s.postNotice(ctx, id, body) })
	}
}

// disable writes destination id to the config topic with enabled: false and autoDisabled set,
// unless it is disabled already (another deliverer did it, or an operator), and says whether
// it wrote it. The write is a transaction of the config writers (platform.ConfigWriter,
// docs/console.md#more-than-one-console): it disables the destination as the last committed
// write left it, so a console's change made meanwhile is kept, not replaced.
func (s *Service) disable(ctx context.Context, id string, n dueNotice, now time.Time) (bool, error) {
	if cur, ok := s.deps.Config().DestinationByID(id); !ok || !cur.IsEnabled() {
		return false, nil
	}
	keys, err := s.deps.Kafka.ConfigKeyring()
	if err != nil {
		return false, err
	}
	wctx, cancel := context.WithTimeout(ctx, handOffTimeout)
	defer cancel()
	w := platform.ConfigWriter{Kafka: s.deps.Kafka, Topic: s.cfg.AutoDisable.ConfigTopic, Logger: s.logger, Opts: s.deps.KafkaOpts}
	wrote := false
	err = w.Write(wctx, func(ctx context.Context, tx *platform.ConfigTx) error {
		wrote = false
		o, ok, err := tx.Object(ctx, schemas.ConfigObject{Kind: schemas.ConfigKindDestination, ID: id}.Key())
		if err != nil || !ok || o.Destination == nil || !o.Destination.IsEnabled() {
			return err // deleted or disabled meanwhile: nothing to write
		}
		d := *o.Destination
		off := false
		d.Enabled = &off
		d.AutoDisabled = &schemas.AutoDisabled{At: schemas.FormatTimestamp(now), FailingSince: schemas.FormatTimestamp(n.since), After: schemas.Duration(n.budget)}
		rec, err := d.Record()
		if err == nil {
			rec, err = schemas.SealConfigRecord(rec, keys)
		}
		if err == nil {
			_, err = tx.Produce(ctx, rec)
		}
		wrote = err == nil
		return err
	})
	return wrote && err == nil, err
}

// postNotice POSTs a notice to OPERATOR_WEBHOOK_URL, signed with OPERATOR_WEBHOOK_SECRET, a few
// times until it is answered 2xx.
func (s *Service) postNotice(ctx context.Context, id string, body []byte) {
	cfg := s.cfg.AutoDisable
	cl := s.operatorClient()
	defer cl.CloseIdleConnections()
	var last error
	for try := range 5 {
		if try > 0 {
			select {
			case <-time.After(time.Second << (try - 1)): // 1 s, 2 s, 4 s, 8 s
			case <-ctx.Done():
				return
			}
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, cfg.OperatorWebhookURL, bytes.NewReader(body))
		if err != nil {
			cancel()
			last = err
			break
		}
		req.Header.Set("Content-Type", "application/json")
		if cfg.OperatorWebhookSecret != "" {
			req.Header.Set(schemas.HeaderXSignature, schemas.XSignature(cfg.OperatorWebhookSecret, body))
		}
		resp, err := cl.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				cancel()
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		cancel()
		last = err
	}
	s.logger.Warn().Err(last).Str("destination", id).Msg("auto-disable: the operator webhook did not take a notice")
}

// operatorClient is the HTTP client of the operator webhook: not under the address guard (the
// operator's own URL, often an in-cluster alerting service), through Deps.DialContext when set.
func (s *Service) operatorClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if s.deps.DialContext != nil {
		tr.DialContext = s.deps.DialContext
	}
	return &http.Client{Transport: tr, Timeout: s.cfg.Timeout}
}

// isAutoDisabled says whether destination id is auto-disabled now.
func (s *Service) isAutoDisabled(id string) bool {
	d, ok := s.deps.Config().DestinationByID(id)
	return ok && d.IsAutoDisabled()
}

// toParked keeps the delivery of an auto-disabled destination on webhooks.parked until it is
// enabled again; a deleted or suppressed user's is dropped instead, as from the DLQ.
func (s *Service) toParked(d delivery, p *pending) {
	if s.dropIfForgotten(&d, p) {
		return
	}
	rec := s.derived(d.r, s.cfg.AutoDisable.ParkedTopic, map[string]string{
		schemas.HeaderReason:         reasonAutoDisabled,
		schemas.HeaderLastStatus:     "0",
		schemas.HeaderLastError:      "destination auto-disabled",
		schemas.HeaderAttempt:        strconv.Itoa(d.attempt),
		schemas.HeaderFirstAttemptAt: schemas.FormatTimestamp(d.firstAttemptAt),
	})
	s.handOff(rec, p)
}

// unpark re-enqueues the parked deliveries of every destination that is enabled now.
func (s *Service) unpark(ctx context.Context, snap Destinations) error {
	cfg := s.cfg.AutoDisable
	topics := platform.ReplayTopics{DLQ: cfg.ParkedTopic, Deliveries: s.cfg.DeliveriesTopic, Replayed: cfg.ParkedReplayedTopic,
		Suppressions: s.cfg.SuppressionsTopic, DeletionsStatus: s.cfg.DeletionsStatusTopic}
	parked, err := platform.ListDeadLetters(ctx, s.deps.Kafka, s.logger, topics, platform.ReplayFilter{})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range parked {
		id := p.DestinationID
		if seen[id] {
			continue
		}
		seen[id] = true
		d, ok := snap.DestinationByID(id)
		if !ok || !d.IsEnabled() {
			continue // still disabled (or deleted: its parked deliveries expire with the topic)
		}
		sent, err := platform.ReplayDeadLetters(ctx, s.deps.Kafka, s.logger, topics, platform.ReplayFilter{DestinationID: id}, platform.ReplayOptions{})
		if err != nil {
			return err
		}
		s.logger.Info().Str("destination", id).Int("deliveries", len(sent)).Msg("destination enabled again: its parked deliveries are re-enqueued")
	}
	return nil
}
