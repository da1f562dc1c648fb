package shred

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// ErrShredded is the error of Open for a record whose data key is gone: tombstoned on
// tributary.keys (its user was deleted) or unknown once the keys topic was read to its end.
// Every consumer drops such a record as deleted: it is never retried nor dead-lettered.
var ErrShredded = errors.New("the record's data key was shredded: its user was deleted")

// ErrUnavailable wraps the error of a Keyring that could not read the keys topic in time (the
// broker is unreachable): the record is not known to be shredded, and should be read again.
var ErrUnavailable = errors.New("the data keys could not be read")

// DefaultMissWait bounds how long Open waits, on an unknown key id, for the keyring to read
// the keys topic up to its end.
const DefaultMissWait = 30 * time.Second

// Config configures a Keyring.
type Config struct {
	// Kafka reaches the cluster; its DataKeyring is the master key of the data keys, and
	// ShredEvents says whether Seal seals (Sealing).
	Kafka platform.KafkaSettings
	// Opts are added to the keyring's clients (tests use them).
	Opts []kgo.Opt
	// Topic is the keys topic; "": schemas.TopicKeys.
	Topic string
	// MissWait bounds the wait for an unknown key id (Open) and for the keys topic's end
	// (Shred); 0: DefaultMissWait.
	MissWait time.Duration
	Logger   zerolog.Logger
}

// keyID is a data key's id: 16 random bytes, 32 hex digits on the wire.
type keyID [16]byte

// subjectHash is the SHA-256 of a subject: the keys topic never holds the subject itself.
type subjectHash [32]byte

func hashSubject(subject string) subjectHash { return sha256.Sum256([]byte(subject)) }

type dataKey struct {
	aead    cipher.AEAD
	subject subjectHash
	hexID   []byte      // the id as the header carries it, the sealed values' additional data
	gone    atomic.Bool // shredded: set when the keyring forgets it (Key.Live)
}

// DataKeyRecord is the value of one tributary.keys record (docs/topics.md#tributarykeys).
type DataKeyRecord struct {
	// V is the format's version, 1.
	V int `json:"v"`
	// Subject is the lower-case hex SHA-256 of the subject (a userId, else an anonymousId).
	Subject string `json:"subject"`
	// Key is the 32-byte AES-256 key: "enc:v1:<master key id>:…" sealed with the master key
	// (schemas.Keyring.Seal, the record key as additional data), else standard base64.
	Key string `json:"key"`
	// CreatedAt is when the key was made (schemas.FormatTimestamp).
	CreatedAt string `json:"createdAt"`
}

// Keyring holds the live data keys of tributary.keys, creates them (Seal), opens sealed
// records (Open) and shreds a subject's keys (Shred). Its methods are safe for concurrent use;
// Run reads the topic and is called once.
type Keyring struct {
	cfg    Config
	master *schemas.Keyring
	seal   bool
	reader *platform.TopicReader
	logger zerolog.Logger

	clReady chan struct{} // closed once cl is set
	cl      *kgo.Client   // key records and tombstones, offset listings; set by Run
	runCtx  context.Context

	mu        sync.RWMutex
	keys      map[keyID]*dataKey
	bySubject map[subjectHash][]keyID // live keys, oldest first
	shredded  map[keyID]struct{}      // tombstones read since the start
	read      map[int32]int64         // next offset to read, per partition
	advanced  chan struct{}           // closed (and replaced) whenever read advances
	next      *listing                // the end-offset listing the next misses share
	creating  map[subjectHash]*creation
	fatal     error // a key record that cannot be opened: Run returns it
}

// listing is one ListEndOffsets shared by every miss that joined it before it started.
type listing struct {
	done chan struct{}
	ends kadm.ListedOffsets
	err  error
}

// creation is a key being written for a subject: concurrent Seals of the subject wait for it.
type creation struct {
	done chan struct{}
	err  error
}

// New checks cfg and parses the master key (a wrong one is an error naming its setting). The
// keyring reads nothing until Run.
func New(cfg Config) (*Keyring, error) {
	if cfg.Topic == "" {
		cfg.Topic = schemas.TopicKeys
	}
	if cfg.MissWait <= 0 {
		cfg.MissWait = DefaultMissWait
	}
	master, err := cfg.Kafka.DataKeyring()
	if err != nil {
		return nil, err
	}
	k := &Keyring{
		cfg: cfg, master: master, seal: cfg.Kafka.ShredEvents, logger: cfg.Logger.With().Str("component", "keyring").Logger(),
		clReady: make(chan struct{}), runCtx: context.Background(),
		keys: map[keyID]*dataKey{}, bySubject: map[subjectHash][]keyID{}, shredded: map[keyID]struct{}{},
		read: map[int32]int64{}, advanced: make(chan struct{}), creating: map[subjectHash]*creation{},
	}
	k.reader, err = platform.NewTopicReader(platform.TopicReaderConfig{
		Kafka: cfg.Kafka, Topic: cfg.Topic, Apply: k.apply, Polled: k.polled, Follow: true,
		Opts: append([]kgo.Opt{kgo.FetchMaxWait(500 * time.Millisecond)}, cfg.Opts...), Logger: k.logger,
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// Sealing reports whether Seal seals (SHRED_EVENTS); when false, SealRecords leaves records
// plain, and Open still opens what was sealed.
func (k *Keyring) Sealing() bool { return k.seal }

// Ready is closed once the keyring has read every key written before Run started.
func (k *Keyring) Ready() <-chan struct{} { return k.reader.Ready() }

// Run ensures the keys topic exists (platform.KeysTopic), then follows it until ctx is done.
// It fails when a key record cannot be opened with the master key (a wrong or missing
// DATA_ENCRYPTION_KEY): every record sealed with it would otherwise be dropped as deleted.
func (k *Keyring) Run(ctx context.Context) error {
	cl, err := platform.NewKafkaClient(k.cfg.Kafka, k.logger, append([]kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(k.cfg.MissWait),
	}, k.cfg.Opts...)...)
	if err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	defer cl.Close()
	spec := platform.KeysTopic()
	spec.Name = k.cfg.Topic
	if err := platform.EnsureTopics(ctx, kadm.NewClient(cl), k.cfg.Kafka.ReplicationFactor, []platform.TopicSpec{spec}); err != nil && ctx.Err() == nil {
		// Without the right to create topics (tributary-init made it), reading still works.
		k.logger.Warn().Err(err).Str("topic", k.cfg.Topic).Msg("ensuring the keys topic")
	}
	k.mu.Lock()
	k.cl, k.runCtx = cl, ctx
	k.mu.Unlock()
	close(k.clReady)
	return k.reader.Run(ctx)
}

func parseKeyID(hexID []byte) (keyID, bool) {
	var id keyID
	if len(hexID) != 2*len(id) {
		return id, false
	}
	_, err := hex.Decode(id[:], hexID)
	return id, err == nil
}

// apply reads one tributary.keys record (Run's goroutine).
func (k *Keyring) apply(r *kgo.Record) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.Offset+1 > k.read[r.Partition] {
		k.read[r.Partition] = r.Offset + 1
	}
	id, ok := parseKeyID(r.Key)
	if !ok {
		k.logger.Warn().Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping a keys record whose key is not a key id")
		return
	}
	if r.Value == nil {
		k.forget(id)
		k.shredded[id] = struct{}{}
		return
	}
	if _, known := k.keys[id]; known {
		return // written by this keyring, or read again
	}
	dk, err := k.decodeKey(r.Key, r.Value)
	if err != nil {
		if k.fatal == nil {
			k.fatal = fmt.Errorf("keyring: data key %s (%s partition %d offset %d): %w", r.Key, r.Topic, r.Partition, r.Offset, err)
		}
		return
	}
	k.add(id, dk)
}

// polled tells the misses waiting for the keyring to read further that it did, and stops Run
// on a key that could not be opened.
func (k *Keyring) polled(bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	close(k.advanced)
	k.advanced = make(chan struct{})
	return k.fatal
}

// add indexes a live key (k.mu held).
func (k *Keyring) add(id keyID, dk *dataKey) {
	k.keys[id] = dk
	k.bySubject[dk.subject] = append(k.bySubject[dk.subject], id)
}

// forget drops a key (k.mu held).
func (k *Keyring) forget(id keyID) {
	dk, ok := k.keys[id]
	if !ok {
		return
	}
	delete(k.keys, id)
	dk.gone.Store(true)
	live := k.bySubject[dk.subject]
	for i, other := range live {
		if other == id {
			live = append(live[:i], live[i+1:]...)
			break
		}
	}
	if len(live) == 0 {
		delete(k.bySubject, dk.subject)
	} else {
		k.bySubject[dk.subject] = live
	}
}

func (k *Keyring) decodeKey(hexID, value []byte) (*dataKey, error) {
	var rec DataKeyRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if rec.V != 1 {
		return nil, fmt.Errorf("format version %d, want 1", rec.V)
	}
	var subject subjectHash
	if n, err := hex.Decode(subject[:], []byte(rec.Subject)); err != nil || n != len(subject) {
		return nil, errors.New("the subject is not a hex SHA-256")
	}
	var raw []byte
	if strings.HasPrefix(rec.Key, schemas.EncryptedPrefix) {
		if k.master == nil {
			return nil, errors.New("it is sealed with a master key, and neither DATA_ENCRYPTION_KEY nor CONFIG_ENCRYPTION_KEY is set (docs/security.md#crypto-shredding)")
		}
		plain, err := k.master.Open(string(hexID), rec.Key)
		if err != nil {
			return nil, fmt.Errorf("opening it with the master key: %w", err)
		}
		if raw, err = base64.StdEncoding.DecodeString(plain); err != nil {
			return nil, errors.New("the sealed key is not base64")
		}
	} else {
		var err error
		if raw, err = base64.StdEncoding.DecodeString(rec.Key); err != nil {
			return nil, errors.New("the key is neither sealed nor base64")
		}
	}
	return newDataKey(hexID, subject, raw)
}

func newDataKey(hexID []byte, subject subjectHash, raw []byte) (*dataKey, error) {
	if len(raw) != 32 {
		return nil, fmt.Errorf("the key is %d bytes, want 32", len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &dataKey{aead: aead, subject: subject, hexID: append([]byte(nil), hexID...)}, nil
}

// client waits for Run to have made its client.
func (k *Keyring) client(ctx context.Context) (*kgo.Client, error) {
	select {
	case <-k.clReady:
		return k.cl, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: the keyring is not running: %w", ErrUnavailable, ctx.Err())
	}
}

// newest returns the newest live key of a subject (k.mu held for reading).
func (k *Keyring) newest(h subjectHash) *dataKey {
	live := k.bySubject[h]
	if len(live) == 0 {
		return nil
	}
	return k.keys[live[len(live)-1]]
}

// Prepare makes sure each subject ("" skipped) has a live key, creating the missing ones:
// their key records are produced together and acknowledged by Kafka before Prepare returns,
// so that a key is durable before any record sealed with it is written. It waits for the
// keyring to be Ready first (a key written before the start is used, not made again).
// Concurrent Prepares of one subject share its creation. Two processes may still each create a
// key for a subject: both stay valid, and both are shredded together.
func (k *Keyring) Prepare(ctx context.Context, subjects ...string) error {
	hashes := make([]subjectHash, 0, len(subjects))
	for _, s := range subjects {
		if s != "" {
			hashes = append(hashes, hashSubject(s))
		}
	}
	return k.prepare(ctx, hashes)
}

// prepare is Prepare for the subjects' hashes.
func (k *Keyring) prepare(ctx context.Context, hashes []subjectHash) error {
	select {
	case <-k.Ready():
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the keys topic to be read: %w", ErrUnavailable, ctx.Err())
	}
	// Under the read lock first, whether any subject lacks a key: almost always none does (a
	// user's key is made once), and the exclusive lock would serialize every service's seals
	// and opens behind this one.
	k.mu.RLock()
	missing := false
	for _, h := range hashes {
		if k.newest(h) == nil {
			missing = true
			break
		}
	}
	k.mu.RUnlock()
	if !missing {
		return nil
	}
	var recs []*kgo.Record
	var made []*dataKey
	var mine []subjectHash
	var waits []*creation
	k.mu.Lock()
	for _, h := range hashes {
		if k.newest(h) != nil {
			continue
		}
		if c, ok := k.creating[h]; ok {
			waits = append(waits, c)
			continue
		}
		rec, dk, err := k.newKeyRecord(h)
		if err != nil {
			k.mu.Unlock()
			return err
		}
		k.creating[h] = &creation{done: make(chan struct{})}
		recs, made, mine = append(recs, rec), append(made, dk), append(mine, h)
	}
	k.mu.Unlock()
	var err error
	if len(recs) > 0 {
		err = k.produce(ctx, recs)
		k.mu.Lock()
		for i, h := range mine {
			c := k.creating[h]
			delete(k.creating, h)
			if err == nil {
				id, _ := parseKeyID(recs[i].Key)
				_, gone := k.shredded[id]
				if _, read := k.keys[id]; !gone && !read { // the reader may have read it first
					k.add(id, made[i])
				}
			}
			c.err = err
			close(c.done)
		}
		k.mu.Unlock()
	}
	for _, c := range waits {
		select {
		case <-c.done:
			err = errors.Join(err, c.err)
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
	return err
}

// newKeyRecord makes a key and its tributary.keys record.
func (k *Keyring) newKeyRecord(h subjectHash) (*kgo.Record, *dataKey, error) {
	var id keyID
	raw := make([]byte, 32)
	if _, err := rand.Read(id[:]); err != nil {
		return nil, nil, err
	}
	if _, err := rand.Read(raw); err != nil {
		return nil, nil, err
	}
	hexID := []byte(hex.EncodeToString(id[:]))
	dk, err := newDataKey(hexID, h, raw)
	if err != nil {
		return nil, nil, err
	}
	rec := DataKeyRecord{V: 1, Subject: hex.EncodeToString(h[:]), CreatedAt: schemas.FormatTimestamp(time.Now())}
	if k.master != nil {
		if rec.Key, err = k.master.Seal(string(hexID), base64.StdEncoding.EncodeToString(raw)); err != nil {
			return nil, nil, err
		}
		// The sealed form holds the base64 text: decodeKey opens it, then decodes it.
	} else {
		rec.Key = base64.StdEncoding.EncodeToString(raw)
	}
	value, err := json.Marshal(rec)
	if err != nil {
		return nil, nil, err
	}
	return &kgo.Record{Topic: k.cfg.Topic, Key: hexID, Value: value}, dk, nil
}

// produce writes key records or tombstones and waits for Kafka's acknowledgement.
func (k *Keyring) produce(ctx context.Context, recs []*kgo.Record) error {
	cl, err := k.client(ctx)
	if err != nil {
		return err
	}
	if err := platform.ProduceAll(ctx, cl, recs); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Live reports whether the key a header names is live in this keyring: false once its
// tombstone was read (or Shred made it). A plain record (hexID nil) is live.
func (k *Keyring) Live(hexID []byte) bool {
	if hexID == nil {
		return true
	}
	id, ok := parseKeyID(hexID)
	if !ok {
		return false
	}
	k.mu.RLock()
	_, live := k.keys[id]
	k.mu.RUnlock()
	return live
}

// Len is the number of live keys held.
func (k *Keyring) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.keys)
}

// key returns the live key of an id; on a miss it waits (at most MissWait) until the keyring
// has read the keys topic up to the end offsets listed after the miss, then looks again.
func (k *Keyring) key(hexID []byte) (*dataKey, error) {
	id, ok := parseKeyID(hexID)
	if !ok {
		return nil, fmt.Errorf("header %s: %q is not a key id", schemas.HeaderDataKey, hexID)
	}
	k.mu.RLock()
	dk, live := k.keys[id]
	gone := false
	if !live {
		_, gone = k.shredded[id]
	}
	ctx := k.runCtx
	k.mu.RUnlock()
	switch {
	case live:
		return dk, nil
	case gone:
		return nil, ErrShredded
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.MissWait)
	defer cancel()
	if err := k.catchUp(ctx, id); err != nil {
		return nil, err
	}
	k.mu.RLock()
	dk, live = k.keys[id]
	k.mu.RUnlock()
	if !live {
		return nil, ErrShredded
	}
	return dk, nil
}

// catchUp waits until the keyring has read every partition of the keys topic up to the end
// offsets listed now (or until it holds the key id, when id is not zero). The listing is
// shared by every caller that asked before it started.
func (k *Keyring) catchUp(ctx context.Context, id keyID) error {
	k.mu.Lock()
	l := k.next
	if l == nil {
		l = &listing{done: make(chan struct{})}
		k.next = l
		go k.list(l)
	}
	k.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
		return fmt.Errorf("%w: listing the end offsets of %s: %w", ErrUnavailable, k.cfg.Topic, ctx.Err())
	}
	if l.err != nil {
		return fmt.Errorf("%w: listing the end offsets of %s: %w", ErrUnavailable, k.cfg.Topic, l.err)
	}
	for {
		k.mu.RLock()
		_, found := k.keys[id]
		behind := false
		l.ends.Each(func(o kadm.ListedOffset) { behind = behind || k.read[o.Partition] < o.Offset })
		advanced := k.advanced
		k.mu.RUnlock()
		if found && id != (keyID{}) || !behind {
			return nil
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return fmt.Errorf("%w: reading %s to its end: %w", ErrUnavailable, k.cfg.Topic, ctx.Err())
		}
	}
}

// list runs one listing of the keys topic's end offsets. It detaches l first, so that a miss
// after this point starts a listing of its own (which then sees every key written before it).
func (k *Keyring) list(l *listing) {
	defer close(l.done)
	k.mu.Lock()
	if k.next == l {
		k.next = nil
	}
	ctx := k.runCtx
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, k.cfg.MissWait)
	defer cancel()
	cl, err := k.client(ctx)
	if err != nil {
		l.err = err
		return
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, k.cfg.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		l.err = err
		return
	}
	l.ends = ends
}

// Shred tombstones every live key of subject and waits for Kafka's acknowledgement; it returns
// how many. It first reads the keys topic up to its end, so that keys other processes made for
// the subject are shredded too. Shredding a subject without keys returns 0: it is idempotent.
func (k *Keyring) Shred(ctx context.Context, subject string) (int, error) {
	select {
	case <-k.Ready():
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: waiting for the keys topic to be read: %w", ErrUnavailable, ctx.Err())
	}
	wctx, cancel := context.WithTimeout(ctx, k.cfg.MissWait)
	err := k.catchUp(wctx, keyID{})
	cancel()
	if err != nil {
		return 0, err
	}
	h := hashSubject(subject)
	k.mu.RLock()
	live := append([]keyID(nil), k.bySubject[h]...)
	k.mu.RUnlock()
	if len(live) == 0 {
		return 0, nil
	}
	recs := make([]*kgo.Record, len(live))
	for i, id := range live {
		recs[i] = &kgo.Record{Topic: k.cfg.Topic, Key: []byte(hex.EncodeToString(id[:]))}
	}
	if err := k.produce(ctx, recs); err != nil {
		return 0, err
	}
	k.mu.Lock()
	for _, id := range live {
		k.forget(id)
		k.shredded[id] = struct{}{}
	}
	k.mu.Unlock()
	return len(live), nil
}
