package platform

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// ConfigChange is one change applying a config file makes (or, for a diff, would make).
type ConfigChange struct {
	// Key is the record key: "destination/order-hooks".
	Key string
	// Action is "create", "update" or "delete".
	Action string
	// Fields are, for an update, the fields that change (names only: safe for secrets).
	Fields []string
}

func (c ConfigChange) String() string {
	if c.Action == "update" {
		return c.Action + " " + c.Key + ": " + strings.Join(c.Fields, ", ")
	}
	return c.Action + " " + c.Key
}

// ApplyOptions configure ApplyConfigFile.
type ApplyOptions struct {
	// Origin of the file's objects; "": schemas.FileOrigin of the file's base name.
	Origin string
	// PruneEveryFile deletes every object that a config file (any file) or no one manages and
	// that this file does not list, not only those of this file's origin; objects of other
	// origins (the console) stay. `make run` uses it: its file is the whole config.
	PruneEveryFile bool
	// DryRun computes the changes and writes nothing (a diff).
	DryRun bool
}

// ApplyConfigFile makes the config topic hold what the file at path declares, for the objects
// the file manages (docs/configuration.md#declarative-config): every object of the file is
// written with the file's origin (unchanged ones are not written again); the objects of the
// file's origin that it no longer lists are deleted (tombstones); objects of another origin are
// never touched — a file that lists one is refused before anything is written. With
// CONFIG_ENCRYPTION_KEY (kafka.ConfigEncryptionKey) secrets are written encrypted, and a
// record whose secrets are still in clear, or encrypted with another key than the first
// (schemas.NeedsSealing), is written again. It returns the changes, in the
// order written, once Kafka acknowledged them.
func ApplyConfigFile(ctx context.Context, kafka KafkaSettings, topic, path string, opts ApplyOptions, logger zerolog.Logger) ([]ConfigChange, error) {
	cfg, err := schemas.LoadConfigFile(path)
	if err != nil {
		return nil, err // it names the file (and the line)
	}
	origin := opts.Origin
	if origin == "" {
		origin = schemas.FileOrigin(filepath.Base(path))
	}
	keys, err := kafka.ConfigKeyring()
	if err != nil {
		return nil, err
	}
	for i := range cfg.Sources {
		cfg.Sources[i].Origin = origin
	}
	for i := range cfg.Destinations {
		cfg.Destinations[i].Origin = origin
	}
	for i := range cfg.Audiences {
		cfg.Audiences[i].Origin = origin
	}
	for i := range cfg.ComputedTraits {
		cfg.ComputedTraits[i].Origin = origin
	}
	for i := range cfg.TrackingPlans {
		cfg.TrackingPlans[i].Origin = origin
	}
	if cfg.Console != nil {
		for i := range cfg.Console.Users {
			cfg.Console.Users[i].Origin = origin
		}
	}
	want, err := cfg.Records()
	if err != nil {
		return nil, fmt.Errorf("applying %s: %w", path, err)
	}
	current, err := readConfigTopic(ctx, kafka, topic, keys, logger)
	if err != nil {
		return nil, fmt.Errorf("applying %s: reading %s: %w", path, topic, err)
	}
	ours := func(o string) bool {
		return o == origin || (opts.PruneEveryFile && (o == "" || strings.HasPrefix(o, schemas.OriginFilePrefix)))
	}
	var changes []ConfigChange
	var out []schemas.ConfigRecord
	var conflicts []error
	listed := map[string]bool{}
	for _, rec := range want {
		listed[rec.Key] = true
		obj, err := schemas.DecodeConfigRecord(rec.Key, rec.Value)
		if err != nil {
			return nil, fmt.Errorf("applying %s: %w", path, err)
		}
		cur, exists := current[rec.Key]
		if exists && cur.obj.Origin() != "" && !ours(cur.obj.Origin()) {
			conflicts = append(conflicts, fmt.Errorf("%s is managed by %s, not by %s: remove it from the file (or delete it there first)", rec.Key, cur.obj.Origin(), origin))
			continue
		}
		sealed, err := schemas.SealConfigRecord(rec, keys)
		if err != nil {
			return nil, err
		}
		switch fields := schemas.ConfigChanges(cur.obj, obj); {
		case !exists:
			changes = append(changes, ConfigChange{Key: rec.Key, Action: "create"})
		case len(fields) > 0:
			changes = append(changes, ConfigChange{Key: rec.Key, Action: "update", Fields: fields})
		case schemas.NeedsSealing(schemas.ConfigRecord{Key: rec.Key, Value: cur.raw}, keys):
			// In clear, or encrypted with another key than the first: written again (rotation).
			changes = append(changes, ConfigChange{Key: rec.Key, Action: "update", Fields: []string{"secrets encrypted with key " + keys.KeyIDs()[0]}})
		default:
			continue // unchanged: not written again
		}
		out = append(out, sealed)
	}
	if err := errors.Join(conflicts...); err != nil {
		return nil, fmt.Errorf("applying %s: nothing written: %w", path, err)
	}
	for _, key := range slicesSortedKeys(current) {
		if !listed[key] && ours(current[key].obj.Origin()) {
			changes = append(changes, ConfigChange{Key: key, Action: "delete"})
			out = append(out, schemas.ConfigRecord{Key: key})
		}
	}
	if opts.DryRun || len(out) == 0 {
		return changes, nil
	}
	if err := produceConfig(ctx, kafka, topic, out, logger); err != nil {
		return nil, fmt.Errorf("applying %s: %w", path, err)
	}
	writeConfigAudit(ctx, kafka, "", current, out, keys, logger)
	return changes, nil
}

// ReencryptConfig writes again, encrypted with the first key of CONFIG_ENCRYPTION_KEY, every
// object of the config topic whose record holds a secret in clear or encrypted with another
// key (schemas.NeedsSealing), whatever its origin (a config file's or the console's); each
// keeps its origin and content. It returns the changes, once Kafka acknowledged them (with
// dryRun, only the changes). Without a key it is an error. `tributary-init reencrypt` runs it
// (docs/configuration.md#secrets-at-rest); the console's POST /v1/config/reencrypt does the same
// through its own writes. The records written before stay in the topic until compaction
// removes them.
func ReencryptConfig(ctx context.Context, kafka KafkaSettings, topic string, dryRun bool, logger zerolog.Logger) ([]ConfigChange, error) {
	keys, err := kafka.ConfigKeyring()
	if err != nil {
		return nil, err
	}
	if keys == nil {
		return nil, errors.New("re-encrypting the config: CONFIG_ENCRYPTION_KEY is not set: set it (docs/configuration.md#secrets-at-rest)")
	}
	current, err := readConfigTopic(ctx, kafka, topic, keys, logger)
	if err != nil {
		return nil, fmt.Errorf("re-encrypting the config: reading %s: %w", topic, err)
	}
	var changes []ConfigChange
	var out []schemas.ConfigRecord
	for _, key := range slicesSortedKeys(current) {
		cur := current[key]
		if cur.obj.Destination == nil || !schemas.NeedsSealing(schemas.ConfigRecord{Key: key, Value: cur.raw}, keys) {
			continue
		}
		rec, err := cur.obj.Destination.Record()
		if err == nil {
			rec, err = schemas.SealConfigRecord(rec, keys)
		}
		if err != nil {
			return nil, fmt.Errorf("re-encrypting the config: %w", err)
		}
		out = append(out, rec)
		changes = append(changes, ConfigChange{Key: key, Action: "update", Fields: []string{"secrets encrypted with key " + keys.KeyIDs()[0]}})
	}
	if dryRun || len(out) == 0 {
		return changes, nil
	}
	if err := produceConfig(ctx, kafka, topic, out, logger); err != nil {
		return nil, fmt.Errorf("re-encrypting the config: %w", err)
	}
	writeConfigAudit(ctx, kafka, "config.reencrypt", current, out, keys, logger)
	return changes, nil
}

// produceConfig writes recs to the config topic with a client of its own, waiting for every
// in-sync replica's acknowledgement.
func produceConfig(ctx context.Context, kafka KafkaSettings, topic string, recs []schemas.ConfigRecord, logger zerolog.Logger) error {
	cl, err := NewKafkaClient(kafka, logger, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer cl.Close()
	return ProduceConfigRecords(ctx, cl, topic, recs...)
}

// currentObject is one object of the config topic as it is: decoded, and its raw value.
type currentObject struct {
	obj schemas.ConfigObject
	raw []byte
}

// readConfigTopic reads the config topic to its end: the live objects by key. A record that
// does not decode (a key this process does not have) is an error: its owner is unknown.
func readConfigTopic(ctx context.Context, kafka KafkaSettings, topic string, keys *schemas.Keyring, logger zerolog.Logger) (map[string]currentObject, error) {
	out := map[string]currentObject{}
	bad := map[string]error{} // the last record of these keys does not decode
	reader, err := NewTopicReader(TopicReaderConfig{
		Kafka: kafka, Topic: topic, Logger: logger,
		NoWait: true, // a missing topic is an error at once (tributary-init creates it), not a wait
		Apply: func(r *kgo.Record) {
			key := string(r.Key)
			delete(bad, key)
			if len(r.Value) == 0 {
				delete(out, key)
				return
			}
			o, err := schemas.DecodeConfigRecordWith(key, r.Value, keys)
			if err != nil {
				bad[key] = err
				delete(out, key)
				return
			}
			out[key] = currentObject{obj: o, raw: r.Value}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := reader.Run(ctx); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var errs []error
	for _, err := range bad {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

func slicesSortedKeys(m map[string]currentObject) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
