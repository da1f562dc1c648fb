package shred_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testKey(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }

func settings(brokers []string) platform.KafkaSettings {
	return platform.KafkaSettings{Brokers: brokers, ReplicationFactor: -1, Partitions: 3, ShredEvents: true}
}

// start runs a keyring until the test ends and waits for it to be ready.
func start(t *testing.T, kafka platform.KafkaSettings) *shred.Keyring {
	t.Helper()
	k, err := shred.New(shred.Config{Kafka: kafka, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), MissWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("keyring Run: %v", err)
		}
	})
	select {
	case <-k.Ready():
	case err := <-done:
		t.Fatalf("keyring stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("keyring not ready")
	}
	return k
}

func sealedRecord(t *testing.T, k *shred.Keyring, subject string, plain []byte) *kgo.Record {
	t.Helper()
	r := &kgo.Record{Topic: schemas.TopicEvents, Key: []byte(subject), Value: append([]byte(nil), plain...)}
	if err := k.SealRecords(context.Background(), []*kgo.Record{r}, shred.RecordKey); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := start(t, settings(kafkatest.Embedded(t)))
	plain := []byte(`{"userId":"u1","traits":{"email":"jane@example.com"}}`)
	r := sealedRecord(t, k, "u1", plain)
	if bytes.Contains(r.Value, []byte("jane@example.com")) || len(shred.KeyOf(r)) != 32 {
		t.Fatalf("not sealed: key %q value %q", shred.KeyOf(r), r.Value)
	}
	got, err := k.Open(r)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v; want %q", got, err, plain)
	}
	// Same subject, same key; another subject, another key.
	r2 := sealedRecord(t, k, "u1", plain)
	r3 := sealedRecord(t, k, "u2", plain)
	if !bytes.Equal(shred.KeyOf(r2), shred.KeyOf(r)) || bytes.Equal(shred.KeyOf(r3), shred.KeyOf(r)) {
		t.Fatalf("keys: u1 %s, u1 again %s, u2 %s", shred.KeyOf(r), shred.KeyOf(r2), shred.KeyOf(r3))
	}
	// A plain record opens as it is; a record without subject stays plain.
	p := &kgo.Record{Value: plain}
	if got, err := k.Open(p); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open(plain) = %q, %v", got, err)
	}
	anon := &kgo.Record{Value: []byte("x")}
	if err := k.SealRecords(context.Background(), []*kgo.Record{anon}, shred.RecordKey); err != nil || shred.KeyOf(anon) != nil {
		t.Fatalf("a record without subject was sealed: %v", err)
	}
	// An altered value is damaged, not shredded.
	bad := &kgo.Record{Value: append([]byte(nil), r.Value...), Headers: r.Headers}
	bad.Value[len(bad.Value)-1] ^= 1
	if _, err := k.Open(bad); !errors.Is(err, shred.ErrDamaged) {
		t.Fatalf("Open(altered) = %v, want ErrDamaged", err)
	}
}

func TestShredMakesRecordsUnreadable(t *testing.T) {
	brokers := kafkatest.Embedded(t)
	k := start(t, settings(brokers))
	r := sealedRecord(t, k, "u1", []byte("card 4242"))
	other := sealedRecord(t, k, "u2", []byte("keep"))
	n, err := k.Shred(context.Background(), "u1")
	if err != nil || n != 1 {
		t.Fatalf("Shred = %d, %v; want 1", n, err)
	}
	if _, err := k.Open(r); !errors.Is(err, shred.ErrShredded) {
		t.Fatalf("Open after Shred = %v, want ErrShredded", err)
	}
	if k.Live(shred.KeyOf(r)) || !k.Live(shred.KeyOf(other)) {
		t.Fatal("Live: the shredded key is live, or the other user's is not")
	}
	if got, err := k.Open(other); err != nil || string(got) != "keep" {
		t.Fatalf("another user's record: %q, %v", got, err)
	}
	if n, err := k.Shred(context.Background(), "u1"); err != nil || n != 0 {
		t.Fatalf("Shred again = %d, %v; want 0 (idempotent)", n, err)
	}
	// Another keyring, started after the tombstone, does not open the record either: it
	// waits for the keys topic's end, then says shredded.
	k2 := start(t, settings(brokers))
	if _, err := k2.Open(r); !errors.Is(err, shred.ErrShredded) {
		t.Fatalf("a fresh keyring: Open = %v, want ErrShredded", err)
	}
	// The user's new messages get a new key.
	r3 := sealedRecord(t, k, "u1", []byte("new"))
	if bytes.Equal(shred.KeyOf(r3), shred.KeyOf(r)) {
		t.Fatal("a shredded key was used again")
	}
}

// A key another keyring made a moment ago is not read yet: Open waits for it rather than
// calling the record shredded; and Shred on the first keyring tombstones the keys the other
// one made.
func TestKeyOfAnotherClientIsFoundAfterTheWait(t *testing.T) {
	brokers := kafkatest.Embedded(t)
	a := start(t, settings(brokers))
	b := start(t, settings(brokers))
	for i := range 20 {
		subject := "user-" + strings.Repeat("x", i)
		r := sealedRecord(t, a, subject, []byte("hello"))
		got, err := b.Open(r) // at once: b has probably not read the key yet
		if err != nil || string(got) != "hello" {
			t.Fatalf("record %d: b.Open = %q, %v", i, got, err)
		}
	}
	r := sealedRecord(t, a, "shared", []byte("one"))
	// b makes its own key for the same subject when it has not read a's (both valid).
	n, err := b.Shred(context.Background(), "shared")
	if err != nil || n < 1 {
		t.Fatalf("b.Shred = %d, %v", n, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Live(shred.KeyOf(r)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := a.Open(r); !errors.Is(err, shred.ErrShredded) {
		t.Fatalf("a.Open after b shredded = %v, want ErrShredded", err)
	}
}

func TestKeysTopicIsCompactedPromptly(t *testing.T) {
	spec := platform.KeysTopic()
	cfg := spec.Configs()
	want := map[string]string{"cleanup.policy": "compact", "segment.ms": "60000", "delete.retention.ms": "3600000", "min.cleanable.dirty.ratio": "0.01"}
	for name, v := range want {
		if cfg[name] == nil || *cfg[name] != v {
			t.Errorf("%s = %v, want %s", name, cfg[name], v)
		}
	}
	if spec.Partitions != 1 {
		t.Errorf("%d partitions, want 1", spec.Partitions)
	}
	if _, ok := cfg["retention.ms"]; ok {
		t.Error("retention.ms set: live keys must be kept forever")
	}
	found := false
	for _, s := range platform.DefaultTopics(6, schemas.DefaultRetryDelays()) {
		found = found || s.Name == schemas.TopicKeys
	}
	if !found {
		t.Error("DefaultTopics lacks tributary.keys")
	}
	// The keyring creates it with that config when it is missing.
	brokers := kafkatest.Embedded(t)
	start(t, settings(brokers))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rc, err := kadm.NewClient(cl).DescribeTopicConfigs(context.Background(), schemas.TopicKeys)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc {
		for _, v := range c.Configs {
			if v.Value != nil {
				got[v.Key] = *v.Value
			}
		}
	}
	if got["cleanup.policy"] != "compact" || got["segment.ms"] != "60000" {
		t.Errorf("tributary.keys created with %v", got)
	}
}

// readKeys returns the values of tributary.keys.
func readKeys(t *testing.T, brokers []string) [][]byte {
	t.Helper()
	var out [][]byte
	r, err := platform.NewTopicReader(platform.TopicReaderConfig{Kafka: settings(brokers), Topic: schemas.TopicKeys,
		Apply: func(r *kgo.Record) { out = append(out, r.Value) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMasterKeySealsDataKeys(t *testing.T) {
	t.Run("sealed", func(t *testing.T) {
		brokers := kafkatest.Embedded(t)
		s := settings(brokers)
		s.DataEncryptionKey = "m1:" + testKey(1)
		k := start(t, s)
		r := sealedRecord(t, k, "u1", []byte("secret"))
		vals := readKeys(t, brokers)
		if len(vals) != 1 || !bytes.Contains(vals[0], []byte(`"key":"enc:v1:m1:`)) {
			t.Fatalf("keys topic: %q, want the key sealed with m1", vals)
		}
		// Another process with the same master key opens the record.
		if got, err := start(t, s).Open(r); err != nil || string(got) != "secret" {
			t.Fatalf("Open = %q, %v", got, err)
		}
		// CONFIG_ENCRYPTION_KEY serves when DATA_ENCRYPTION_KEY is unset.
		c := settings(brokers)
		c.ConfigEncryptionKey = s.DataEncryptionKey
		if got, err := start(t, c).Open(r); err != nil || string(got) != "secret" {
			t.Fatalf("with CONFIG_ENCRYPTION_KEY: Open = %q, %v", got, err)
		}
	})
	t.Run("plain fallback", func(t *testing.T) {
		brokers := kafkatest.Embedded(t)
		k := start(t, settings(brokers))
		r := sealedRecord(t, k, "u1", []byte("secret"))
		vals := readKeys(t, brokers)
		if len(vals) != 1 || bytes.Contains(vals[0], []byte("enc:v1:")) || !bytes.Contains(vals[0], []byte(`"v":1`)) {
			t.Fatalf("keys topic: %q, want one unsealed key", vals)
		}
		// A master key set later still reads the unsealed keys.
		s := settings(brokers)
		s.DataEncryptionKey = "m1:" + testKey(1)
		if got, err := start(t, s).Open(r); err != nil || string(got) != "secret" {
			t.Fatalf("Open = %q, %v", got, err)
		}
	})
	t.Run("wrong master key", func(t *testing.T) {
		brokers := kafkatest.Embedded(t)
		s := settings(brokers)
		s.DataEncryptionKey = "m1:" + testKey(1)
		sealedRecord(t, start(t, s), "u1", []byte("secret"))
		for _, tt := range []struct{ spec, want string }{
			{"m1:" + testKey(2), "does not decrypt"},
			{"m2:" + testKey(1), "which DATA_ENCRYPTION_KEY does not list"},
			{"", "neither DATA_ENCRYPTION_KEY nor CONFIG_ENCRYPTION_KEY is set"},
		} {
			w := settings(brokers)
			w.DataEncryptionKey = tt.spec
			k, err := shred.New(shred.Config{Kafka: w, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = k.Run(ctx)
			cancel()
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), testKey(1)) {
				t.Errorf("DATA_ENCRYPTION_KEY=%.3s…: Run = %v, want an error with %q", tt.spec, err, tt.want)
			}
		}
		bad := settings(brokers)
		bad.DataEncryptionKey = "m1:short"
		if _, err := shred.New(shred.Config{Kafka: bad}); err == nil || !strings.Contains(err.Error(), "DATA_ENCRYPTION_KEY: entry 1") {
			t.Errorf("a malformed DATA_ENCRYPTION_KEY: %v", err)
		}
	})
}

func TestSealingOff(t *testing.T) {
	brokers := kafkatest.Embedded(t)
	on := start(t, settings(brokers))
	sealed := sealedRecord(t, on, "u1", []byte("old"))
	s := settings(brokers)
	s.ShredEvents = false
	off := start(t, s)
	r := &kgo.Record{Key: []byte("u1"), Value: []byte("plain")}
	if err := off.SealRecords(context.Background(), []*kgo.Record{r}, shred.RecordKey); err != nil || shred.KeyOf(r) != nil || string(r.Value) != "plain" {
		t.Fatalf("SHRED_EVENTS=false sealed: %q %v", r.Value, err)
	}
	if got, err := off.Open(sealed); err != nil || string(got) != "old" {
		t.Fatalf("SHRED_EVENTS=false: Open(sealed) = %q, %v", got, err)
	}
}

// The hot paths' forms: in place (ingest, the router) and with one key look-up (the router,
// the deliverer) give the same sealed values as the copying forms.
func TestSealInPlaceAndKeyHandle(t *testing.T) {
	k := start(t, settings(kafkatest.Embedded(t)))
	ctx := context.Background()
	plain := []byte(`{"userId":"u1","properties":{"card":"4242"}}`)

	// A value with room for the overhead is sealed in its own buffer; one without, in a new
	// buffer, its plaintext kept. Two records of one user in a batch share one new key.
	roomy := append(make([]byte, 0, len(plain)+shred.Overhead), plain...)
	tight := append([]byte(nil), plain...)
	tight = tight[:len(tight):len(tight)]
	recs := []*kgo.Record{
		{Key: []byte("u1"), Value: roomy},
		{Key: []byte("u1"), Value: tight},
		{Key: []byte("u2"), Value: nil}, // a tombstone stays one
	}
	if err := k.SealRecordsInPlace(ctx, recs, shred.RecordKey); err != nil {
		t.Fatal(err)
	}
	if &recs[0].Value[0] != &roomy[0] {
		t.Error("a value with room for the overhead was sealed into a new buffer")
	}
	if &recs[1].Value[0] == &tight[0] || !bytes.Equal(tight, plain) {
		t.Error("a value without room was overwritten")
	}
	if recs[2].Value != nil || shred.KeyOf(recs[2]) != nil {
		t.Error("a tombstone was sealed")
	}
	if !bytes.Equal(shred.KeyOf(recs[0]), shred.KeyOf(recs[1])) {
		t.Fatalf("one user, two keys in one batch: %s, %s", shred.KeyOf(recs[0]), shred.KeyOf(recs[1]))
	}
	if k.Len() != 1 {
		t.Fatalf("%d keys made for one user", k.Len())
	}
	for i, r := range recs[:2] {
		if got, err := k.Open(r); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("record %d: Open = %q, %v", i, got, err)
		}
	}

	// The key handle: Open appends to a reused buffer; SealReserved seals a buffer that kept
	// Headroom bytes in front, in place; both open with the keyring.
	key, err := k.Key(shred.KeyOf(recs[0]))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 512)
	got, err := key.Open(buf, recs[0].Value)
	if err != nil || !bytes.Equal(got, plain) || &got[:1][0] != &buf[:1][0] {
		t.Fatalf("Key.Open = %q, %v (into the given buffer: %v)", got, err, &got[:1][0] == &buf[:1][0])
	}
	reserved := append(make([]byte, shred.Headroom, shred.Headroom+len(plain)+shred.TagSize), plain...)
	sealed := key.SealReserved(reserved)
	if &sealed[0] != &reserved[0] || len(sealed) != len(plain)+shred.Overhead {
		t.Fatalf("SealReserved did not seal in place (%d bytes)", len(sealed))
	}
	r := &kgo.Record{Value: sealed, Headers: []kgo.RecordHeader{{Key: schemas.HeaderDataKey, Value: key.ID()}}}
	if got, err := k.Open(r); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open(SealReserved) = %q, %v", got, err)
	}
	if _, err := key.Open(nil, append(sealed[:len(sealed)-1:len(sealed)-1], sealed[len(sealed)-1]^1)); !errors.Is(err, shred.ErrDamaged) {
		t.Fatalf("Key.Open(altered) = %v, want ErrDamaged", err)
	}

	// Live turns false when the key is shredded, on the handle held since.
	if !key.Live() {
		t.Fatal("a live key is not Live")
	}
	if n, err := k.Shred(ctx, "u1"); err != nil || n != 1 {
		t.Fatalf("Shred = %d, %v", n, err)
	}
	if key.Live() {
		t.Fatal("a shredded key's handle is still Live")
	}
	if _, err := k.Key(shred.KeyOf(recs[0])); !errors.Is(err, shred.ErrShredded) {
		t.Fatalf("Key after Shred = %v, want ErrShredded", err)
	}
}
