package deliverer

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// Per-user ordering (docs/delivery.md#ordering): for a destination with ordering: perUser, one
// user's records (one key of webhooks.deliveries and of the tiers: destinationId:userId) are
// dispatched one at a time, in the order they were read.
//
// Each such key with records in progress has a gate holding its chain: the message ids of the
// user's records this deliverer holds back, in order. Only the chain's first record may be
// attempted, and only when no other record of the key is (the gate's owner). The others wait:
//   - in memory, while nothing of the chain is in a tier (at most orderQueueMax of them; they
//     hold no global token and do not block the poll loop);
//   - otherwise in a retry tier: the tier the head last went to, so that they come due right
//     behind it. A record of the chain that comes back from a tier while it is not first goes
//     back to that tier, unsent, attempt number unchanged.
//
// When the owner is finished (delivered, dead-lettered or dropped) its id leaves the chain and
// the next record in memory, if it is first, is dispatched. When the owner was handed to a tier
// it stays first, and the records waiting in memory follow it to its tier.
//
// The chain lives in memory only: a chain whose first record has not come back within the
// longest tier plus orderStale (its tier partition went to another deliverer, or the record
// was lost) is dropped, and the key starts afresh.

// orderQueueMax bounds the records of one key waiting in memory behind its owner; the next ones
// wait in a tier.
const orderQueueMax = 64

// orderStale is how long past the longest tier a chain may go without progress before it is
// dropped (see above).
const orderStale = time.Minute

type orderGate struct {
	chain   []string // message ids in order; chain[0] is the owner's, or the head waiting in a tier
	owner   *pending // the record being attempted; nil: none
	ownerID string   // its message id
	tiered  bool     // the owner was handed to a tier (toTier): it stays first when it finishes
	inTiers int      // records of the chain waiting in a tier
	tier    int      // the tier the head last went to (-1: none yet); the others follow it there
	queue   []orderWaiter
	moved   time.Time // when the chain last moved (an owner taken or finished)
}

type orderWaiter struct {
	ctx context.Context
	r   *kgo.Record
	p   *pending
	id  string
}

type ordering struct {
	mu    sync.Mutex
	gates map[string]*orderGate // by record key
}

// orderedHold applies the gate to a record of an ordered destination, holding the global token
// (s.sem). It returns false when the record goes on now (it is then the gate's owner, and its
// pending's finish opens the gate); true when it was held back (in memory or handed to a tier),
// the token given back.
func (s *Service) orderedHold(ctx context.Context, d *delivery, p *pending) bool {
	key := string(d.r.Key)
	if key == "" {
		return false
	}
	now := s.now()
	o := &s.order
	o.mu.Lock()
	if o.gates == nil {
		o.gates = map[string]*orderGate{}
	}
	g := o.gates[key]
	if g == nil {
		g = &orderGate{tier: -1, moved: now}
		o.gates[key] = g
	}
	if g.owner == p { // a record of the queue whose turn came
		o.mu.Unlock()
		return false
	}
	if g.owner == nil && len(g.chain) > 0 && now.Sub(g.moved) > slices.Max(s.tierDelays)+orderStale {
		s.logger.Warn().Str("destination", d.destID).Str("message_id", g.chain[0]).Int("held", len(g.chain)).
			Msg("ordering: the first record of a user's chain did not come back from its tier; the chain is dropped")
		s.flushQueue(g, g.queue)
		*g = orderGate{tier: -1, moved: now}
	}
	i := -1
	if !s.isTier[d.r.Topic] && s.warmHold(ctx, d, p) {
		o.mu.Unlock()
		<-s.sem
		return true
	}
	if s.isTier[d.r.Topic] {
		if i = slices.Index(g.chain, d.messageID); i >= 0 {
			g.inTiers--
		}
	}
	if i < 0 {
		g.chain = append(g.chain, d.messageID)
		i = len(g.chain) - 1
	}
	switch {
	case i == 0 && g.owner == nil:
		s.takeGate(key, g, p, d.messageID, now)
		o.mu.Unlock()
		return false
	case i == len(g.chain)-1 && g.owner != nil && !g.tiered && g.inTiers == 0 && len(g.queue) < orderQueueMax:
		g.queue = append(g.queue, orderWaiter{ctx: ctx, r: d.r, p: p, id: d.messageID})
		o.mu.Unlock()
		<-s.sem
		return true
	}
	tier := g.tier
	g.inTiers++
	o.mu.Unlock()
	s.follow(*d, p, tier)
	<-s.sem
	return true
}

// noteOrdered adds the tier records of ordered destinations to their chains as soon as they
// are read (before they are due), in the order read: a user's message read later from
// webhooks.deliveries — after a restart or a rebalance too, when the chains in memory are gone —
// then waits behind them instead of overtaking them.
func (s *Service) noteOrdered(recs []*kgo.Record) {
	cfg := s.deps.Config()
	now := s.now()
	for _, r := range recs {
		var destID, id string
		for _, h := range r.Headers {
			switch h.Key {
			case schemas.HeaderDestinationID:
				destID = string(h.Value)
			case schemas.HeaderMessageID:
				id = string(h.Value)
			}
		}
		if len(r.Key) == 0 || destID == "" {
			continue
		}
		if dest, ok := cfg.DestinationByID(destID); !ok || !dest.Settings.OrderedPerUser() {
			continue
		}
		key := string(r.Key)
		s.order.mu.Lock()
		if s.order.gates == nil {
			s.order.gates = map[string]*orderGate{}
		}
		g := s.order.gates[key]
		if g == nil {
			g = &orderGate{tier: -1, moved: now}
			s.order.gates[key] = g
		}
		if !slices.Contains(g.chain, id) {
			g.chain = append(g.chain, id)
			g.inTiers++
			if g.tier < 0 {
				g.tier = slices.Index(s.tierTopics, r.Topic)
			}
		}
		s.order.mu.Unlock()
	}
}

// takeGate makes p the owner of g (key's gate); its finish opens the gate. Under s.order.mu.
func (s *Service) takeGate(key string, g *orderGate, p *pending, id string, now time.Time) {
	g.owner, g.ownerID, g.tiered, g.moved = p, id, false, now
	p.after = func() { s.openGate(key, p) }
}

// openGate runs when the owner p of key's gate is finished: it leaves the chain (unless it was
// handed to a tier), and the next record goes, or the queue follows the head to its tier.
func (s *Service) openGate(key string, p *pending) {
	o := &s.order
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.gates[key]
	if g == nil || g.owner != p {
		return
	}
	now := s.now()
	g.owner, g.moved = nil, now
	if g.tiered {
		g.tiered = false
		g.inTiers++
	} else if i := slices.Index(g.chain, g.ownerID); i >= 0 {
		g.chain = slices.Delete(g.chain, i, i+1)
	}
	switch {
	case len(g.chain) == 0:
		delete(o.gates, key)
	case len(g.queue) > 0 && g.queue[0].id == g.chain[0]:
		w := g.queue[0]
		g.queue = g.queue[1:]
		s.takeGate(key, g, w.p, w.id, now)
		s.spawn(func() { s.dispatch(w.ctx, w.r, w.p) })
	case len(g.queue) > 0:
		q := g.queue
		g.queue = nil
		g.inTiers += len(q)
		s.flushQueue(g, q)
	}
}

// flushQueue hands the records of q on to g's tier, in order, in a goroutine (openGate may run
// in a produce callback, where producing could wait for itself). Under s.order.mu.
func (s *Service) flushQueue(g *orderGate, q []orderWaiter) {
	if len(q) == 0 {
		return
	}
	tier := g.tier
	s.spawn(func() {
		for _, w := range q {
			d := parseDelivery(w.r, s.now())
			s.follow(d, w.p, tier)
		}
	})
}

// follow hands a held-back record on to tier (the shortest when negative), unsent, its attempt
// number unchanged; past its window it is dead-lettered, and a deleted or suppressed user's is
// dropped: it then leaves its chain.
func (s *Service) follow(d delivery, p *pending, tier int) {
	if tier < 0 {
		tier = s.tierFor(0)
	}
	leave := func() {
		o := &s.order
		o.mu.Lock()
		defer o.mu.Unlock()
		key := string(d.r.Key)
		if g := o.gates[key]; g != nil {
			if i := slices.Index(g.chain, d.messageID); i >= 0 {
				g.chain = slices.Delete(g.chain, i, i+1)
				g.inTiers--
			}
			if len(g.chain) == 0 && g.owner == nil && len(g.queue) == 0 {
				delete(o.gates, key)
			}
		}
	}
	if s.dropIfForgotten(&d, p) {
		leave()
		return
	}
	if s.now().Add(s.tierDelays[tier]).After(d.firstAttemptAt.Add(s.cfg.RetryWindow)) {
		leave()
		s.toDLQ(d, p, "retry_window_expired", 0, "ordering: held back behind the user's earlier message past RETRY_WINDOW")
		return
	}
	s.metrics.orderHeld.WithLabelValues(d.destID).Inc()
	s.toTier(d, p, d.attempt, tier, "ordering: behind the user's earlier message", 0)
}

// orderTiered notes that the record p, handed to tier, is its gate's owner: it stays first in
// its chain, and the user's next records follow it to that tier.
func (s *Service) orderTiered(d *delivery, p *pending, tier int) {
	if p.after == nil {
		return
	}
	o := &s.order
	o.mu.Lock()
	defer o.mu.Unlock()
	if g := o.gates[string(d.r.Key)]; g != nil && g.owner == p {
		g.tiered, g.tier = true, tier
	}
}

// orderLost releases the gates whose owner is a record of a lost partition (revoked: it will
// not be finished here, its new owner reads it again): the gate is dropped, and the records
// waiting in its queue are dispatched again, in order, by the poll loop (warmDone).
func (s *Service) orderLost(lost map[string][]int32) {
	o := &s.order
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, g := range o.gates {
		if g.owner == nil || !contains(lost[g.owner.r.Topic], g.owner.r.Partition) {
			continue
		}
		s.warm.mu.Lock()
		s.warm.held = append(s.warm.held, g.queue...)
		s.warm.mu.Unlock()
		delete(o.gates, key)
	}
}

// orderWarmMax bounds how long, after an assignment, the fresh records of ordered destinations
// wait for the newly assigned tier partitions to be read (warming).
const orderWarmMax = 10 * time.Second

// warming: after an assignment (a start, a restart, a rebalance) the chains of the records
// waiting in the tiers are not known yet; until each newly assigned tier partition has been
// read up to where it ended at the assignment (or orderWarmMax passed), the records of ordered
// destinations read from webhooks.deliveries wait in memory, in order, and are dispatched
// after: behind the tier records of their user (noteOrdered), not before them.
type warming struct {
	mu     sync.Mutex
	behind map[partKey]int64 // tier partitions to read up to that offset (exclusive)
	until  time.Time
	held   []orderWaiter // in the order read; dispatched by the poll loop
}

// warmTiers starts warming for the tier partitions of assigned that hold records not yet
// committed (franz-go's OnPartitionsAssigned: before any of their records is polled).
func (s *Service) warmTiers(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	var topics []string
	for t := range assigned {
		if s.isTier[t] {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	var committed kadm.OffsetResponses
	if err == nil {
		committed, err = adm.FetchOffsets(ctx, s.cfg.Group)
	}
	if err != nil {
		s.logger.Warn().Err(err).Msg("ordering: reading the tiers' end offsets; ordered destinations' records wait orderWarmMax")
	}
	w := &s.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.behind == nil {
		w.behind = map[partKey]int64{}
	}
	for t, ps := range assigned {
		if !s.isTier[t] {
			continue
		}
		for _, p := range ps {
			end, ok := ends.Lookup(t, p)
			if err != nil || !ok {
				w.behind[partKey{t, p}] = -1 // unknown: until orderWarmMax
				continue
			}
			from := int64(0)
			if c, ok := committed.Lookup(t, p); ok && c.At >= 0 {
				from = c.At
			}
			if end.Offset > from {
				w.behind[partKey{t, p}] = end.Offset
			}
		}
	}
	if len(w.behind) > 0 {
		w.until = s.now().Add(orderWarmMax)
	}
}

// warmRead notes that tier partition k was read up to its record at offset last.
func (s *Service) warmRead(k partKey, last int64) {
	w := &s.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	if end, ok := w.behind[k]; ok && end >= 0 && last+1 >= end {
		delete(w.behind, k)
	}
}

// warmHold holds a record of webhooks.deliveries of an ordered destination while warming.
func (s *Service) warmHold(ctx context.Context, d *delivery, p *pending) bool {
	w := &s.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.behind) == 0 && len(w.held) == 0 {
		return false
	}
	w.held = append(w.held, orderWaiter{ctx: ctx, r: d.r, p: p, id: d.messageID})
	return true
}

// warmDone dispatches, in order, the records held while warming once it is over (the poll
// loop calls it before each poll).
func (s *Service) warmDone(ctx context.Context) {
	w := &s.warm
	w.mu.Lock()
	if len(w.held) == 0 || len(w.behind) > 0 && s.now().Before(w.until) {
		w.mu.Unlock()
		return
	}
	clear(w.behind)
	held := w.held
	w.held = nil
	w.mu.Unlock()
	for _, h := range held {
		s.dispatch(h.ctx, h.r, h.p)
	}
}
