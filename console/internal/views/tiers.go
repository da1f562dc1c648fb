package views

import (
	"errors"
	"slices"
	"sync"
	"time"
)

// TierRow is the backlog of one retry tier topic.
type TierRow struct {
	Topic string
	Lag   int64
}

// TierLag is the last reading of the retry tiers' backlog (the deliverer group's lag on each
// retry tier topic), so that a page never waits for Kafka. Safe for concurrent use.
type TierLag struct {
	mu   sync.Mutex
	rows []TierRow
	err  error
	at   time.Time
}

// Set records a reading made at at: rows, or the error that stopped it.
func (t *TierLag) Set(rows []TierRow, err error, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows, t.err, t.at = slices.Clone(rows), err, at
}

// Rows is the last reading: a copy of its rows, or its error; an error too before the first.
func (t *TierLag) Rows() ([]TierRow, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at.IsZero() {
		return nil, errors.New("not read yet")
	}
	return slices.Clone(t.rows), t.err
}
