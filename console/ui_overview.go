package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The overview: what came in per source and went out per destination in the last hour, the
// DLQ sizes and the retry tiers' backlog, problem spots first.

// sourceRow is a source on the overview.
type sourceRow struct {
	ID, Name           string
	Accepted, Rejected uint64
}

// destinationRow is a destination on the overview and the destinations list.
type destinationRow struct {
	ID, Name    string
	Enabled     bool
	Sources     []string
	URLs        int
	Stats       stats // last hour
	DLQ         int
	Failing     bool // under 95 % success in the last hour
	ProblemText string
}

// overviewData is the overview page's data.
type overviewData struct {
	Problems     []string
	Sources      []sourceRow
	Destinations []destinationRow
	Tiers        []tierRow
	TiersError   string
}

// tierRow is the backlog of one retry tier topic.
type tierRow struct {
	Topic string
	Lag   int64
}

// destinationRows is every destination with its last hour's counters and DLQ size.
func (u *ui) destinationRows() []destinationRow {
	var out []destinationRow
	for _, d := range u.s.deps.Store.Snapshot().Destinations() {
		row := destinationRow{ID: d.ID, Name: d.Name, Enabled: d.IsEnabled(), Sources: d.Sources, URLs: len(d.Settings.Webhooks),
			Stats: u.s.statsOf(d.ID, time.Hour, time.Minute), DLQ: u.s.dlq.pending(d.ID)}
		if rate := row.Stats.SuccessRate; rate != nil && *rate < 0.95 {
			row.Failing = true
		}
		out = append(out, row)
	}
	return out
}

// tierBacklog is the deliverer's lag on each retry tier topic (records waiting for their time),
// as the background refresh last read it (runTierLag): a page never waits for Kafka.
func (u *ui) tierBacklog() ([]tierRow, error) {
	u.s.tiers.mu.Lock()
	defer u.s.tiers.mu.Unlock()
	if u.s.tiers.at.IsZero() {
		return nil, errors.New("not read yet")
	}
	return u.s.tiers.rows, u.s.tiers.err
}

// tierLag is the last reading of the retry tiers' backlog.
type tierLag struct {
	mu   sync.Mutex
	rows []tierRow
	err  error
	at   time.Time
}

// tierLagEvery is how often the retry tiers' backlog is read.
const tierLagEvery = 5 * time.Second

// runTierLag reads the deliverer group's lag on the retry tiers every tierLagEvery.
func (s *Service) runTierLag(ctx context.Context) error {
	for {
		rows, err := s.readTierLag(ctx)
		s.tiers.mu.Lock()
		s.tiers.rows, s.tiers.err, s.tiers.at = rows, err, s.now()
		s.tiers.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(tierLagEvery):
		}
	}
}

func (s *Service) readTierLag(ctx context.Context) ([]tierRow, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lags, err := platform.ReadGroupLag(ctx, s.adm, s.cfg.DelivererGroup)
	if err != nil {
		return nil, err
	}
	var out []tierRow
	for _, l := range lags {
		if l.Err != nil {
			return nil, l.Err
		}
		for topic, sum := range l.Topics {
			if strings.HasPrefix(topic, schemas.RetryTopicPrefix) {
				out = append(out, tierRow{Topic: topic, Lag: max(0, sum)})
			}
		}
	}
	slices.SortFunc(out, func(a, b tierRow) int { return strings.Compare(a.Topic, b.Topic) })
	return out, nil
}

func (u *ui) overview(w http.ResponseWriter, r *http.Request) {
	data := overviewData{}
	now := u.s.now()
	u.s.events.mu.Lock()
	for _, src := range u.s.deps.Store.Snapshot().Sources() {
		row := sourceRow{ID: src.ID, Name: src.Name}
		if se := u.s.events.sources[src.ID]; se != nil {
			row.Accepted, row.Rejected = se.lastHour(now)
		}
		data.Sources = append(data.Sources, row)
	}
	u.s.events.mu.Unlock()
	data.Destinations = u.destinationRows()
	// Problem spots first: failing destinations, dead letters, rejecting sources.
	slices.SortStableFunc(data.Destinations, func(a, b destinationRow) int {
		return problemRank(b) - problemRank(a)
	})
	for _, d := range data.Destinations {
		switch {
		case d.Failing:
			data.Problems = append(data.Problems, "Destination "+d.ID+" is failing: "+fmtPct(d.Stats.SuccessRate)+" of its attempts succeeded in the last hour.")
		}
		if d.DLQ > 0 {
			data.Problems = append(data.Problems, "Destination "+d.ID+" has "+fmtCount(d.DLQ)+" messages in its dead-letter queue.")
		}
	}
	slices.SortStableFunc(data.Sources, func(a, b sourceRow) int { return int(b.Rejected) - int(a.Rejected) })
	for _, s := range data.Sources {
		if s.Rejected > 0 {
			data.Problems = append(data.Problems, "Source "+s.ID+" had "+fmtCount(s.Rejected)+" messages rejected in the last hour.")
		}
	}
	tiers, err := u.tierBacklog()
	if err != nil {
		data.TiersError = "The retry tiers' backlog is unknown: " + err.Error()
	}
	data.Tiers = tiers
	u.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: data})
}

// problemRank orders destinations: failing, then with dead letters, then the rest.
func problemRank(d destinationRow) int {
	switch {
	case d.Failing:
		return 2
	case d.DLQ > 0:
		return 1
	}
	return 0
}
