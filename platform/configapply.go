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
// order written, once Kafka acknowledged them. The read, the origin checks and the write are
// one transaction of the config writers' transactional id (ConfigWriter), so a console
// taking an object over at the same time is either seen by the checks or fenced
// (docs/console.md#more-than-one-console). A dry run reads and writes nothing.
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
	if cfg.Identity != nil {
		cfg.Identity.Origin = origin
	}
	want, err := cfg.Records()
	if err != nil {
		return nil, fmt.Errorf("applying %s: %w", path, err)
	}
	ours := func(o string) bool {
		return o == origin || (opts.PruneEveryFile && (o == "" || strings.HasPrefix(o, schemas.OriginFilePrefix)))
	}
	// plan compares the file with the topic as it is: the changes, and the records to write.
	plan := func(current map[string]currentObject) ([]ConfigChange, []schemas.ConfigRecord, error) {
		var changes []ConfigChange
		var out []schemas.ConfigRecord
		var conflicts []error
		listed := map[string]bool{}
		for _, rec := range want {
			listed[rec.Key] = true
			obj, err := schemas.DecodeConfigRecord(rec.Key, rec.Value)
			if err != nil {
				return nil, nil, fmt.Errorf("applying %s: %w", path, err)
			}
			cur, exists := current[rec.Key]
			if exists && cur.obj.Origin() != "" && !ours(cur.obj.Origin()) {
				conflicts = append(conflicts, fmt.Errorf("%s is managed by %s, not by %s: remove it from the file (or delete it there first)", rec.Key, cur.obj.Origin(), origin))
				continue
			}
			sealed, err := schemas.SealConfigRecord(rec, keys)
			if err != nil {
				return nil, nil, err
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
			return nil, nil, fmt.Errorf("applying %s: nothing written: %w", path, err)
		}
		for _, key := range slicesSortedKeys(current) {
			if !listed[key] && ours(current[key].obj.Origin()) {
				changes = append(changes, ConfigChange{Key: key, Action: "delete"})
				out = append(out, schemas.ConfigRecord{Key: key})
			}
		}
		return changes, out, nil
	}
	var changes []ConfigChange
	var planErr error
	var current map[string]currentObject // what the last plan saw, and wrote: for the audit trail
	var out []schemas.ConfigRecord
	err = writeConfigChecked(ctx, kafka, topic, keys, opts.DryRun, logger, func(cur map[string]currentObject) ([]schemas.ConfigRecord, error) {
		current = cur
		changes, out, planErr = plan(cur)
		return out, planErr
	})
	switch {
	case err != nil && planErr != nil:
		return nil, planErr // it names the file
	case err != nil:
		return nil, fmt.Errorf("applying %s: %w", path, err)
	}
	if opts.DryRun || len(out) == 0 {
		return changes, nil
	}
	writeConfigAudit(ctx, kafka, "", current, out, keys, logger)
	return changes, nil
}

// writeConfigChecked is the transactional read-check-write of tributary-init's commands
// (docs/console.md#more-than-one-console): in a ConfigWriter's transaction it reads the topic
// up to its last stable offsets (read_committed), calls plan with the live objects, and
// writes the records plan returns; a write that another writer fenced runs plan again on what
// that writer wrote. With dryRun it reads (read_committed) and plans, without taking the
// transactional id, and writes nothing.
func writeConfigChecked(ctx context.Context, kafka KafkaSettings, topic string, keys *schemas.Keyring, dryRun bool, logger zerolog.Logger,
	plan func(current map[string]currentObject) ([]schemas.ConfigRecord, error)) error {
	if dryRun {
		current, err := readConfigTopic(ctx, kafka, topic, keys, logger)
		if err != nil {
			return fmt.Errorf("reading %s: %w", topic, err)
		}
		_, err = plan(current)
		return err
	}
	w := ConfigWriter{Kafka: kafka, Topic: topic, Logger: logger}
	return w.Write(ctx, func(ctx context.Context, tx *ConfigTx) error {
		current, err := readConfigTopic(ctx, kafka, topic, keys, logger)
		if err != nil {
			return fmt.Errorf("reading %s: %w", topic, err)
		}
		out, err := plan(current)
		if err != nil {
			return err
		}
		_, err = tx.Produce(ctx, out...)
		return err
	})
}

// ReencryptConfig writes again, encrypted with the first key of CONFIG_ENCRYPTION_KEY, every
// object of the config topic whose record holds a secret in clear or encrypted with another
// key (schemas.NeedsSealing), whatever its origin (a config file's or the console's); each
// keeps its origin and content. It returns the changes, once Kafka acknowledged them (with
// dryRun, only the changes). Without a key it is an error. `tributary-init reencrypt` runs it
// (docs/configuration.md#secrets-at-rest); the console's POST /v1/config/reencrypt does the same
// through its own writes. Like ApplyConfigFile, it reads and writes in one transaction of the
// config writers (ConfigWriter). The records written before stay in the topic until
// compaction removes them.
func ReencryptConfig(ctx context.Context, kafka KafkaSettings, topic string, dryRun bool, logger zerolog.Logger) ([]ConfigChange, error) {
	keys, err := kafka.ConfigKeyring()
	if err != nil {
		return nil, err
	}
	if keys == nil {
		return nil, errors.New("re-encrypting the config: CONFIG_ENCRYPTION_KEY is not set: set it (docs/configuration.md#secrets-at-rest)")
	}
	var changes []ConfigChange
	var current map[string]currentObject // what the last plan saw, and wrote: for the audit trail
	var out []schemas.ConfigRecord
	err = writeConfigChecked(ctx, kafka, topic, keys, dryRun, logger, func(cur map[string]currentObject) ([]schemas.ConfigRecord, error) {
		changes, current, out = nil, cur, nil
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
				return nil, err
			}
			out = append(out, rec)
			changes = append(changes, ConfigChange{Key: key, Action: "update", Fields: []string{"secrets encrypted with key " + keys.KeyIDs()[0]}})
		}
		return out, nil
	})
	if err != nil {
		return nil, fmt.Errorf("re-encrypting the config: %w", err)
	}
	if dryRun || len(out) == 0 {
		return changes, nil
	}
	writeConfigAudit(ctx, kafka, "config.reencrypt", current, out, keys, logger)
	return changes, nil
}

// currentObject is one object of the config topic as it is: decoded, and its raw value.
type currentObject struct {
	obj schemas.ConfigObject
	raw []byte
}

// readConfigTopic reads the config topic to its last stable offsets (read_committed: aborted
// writes are left out): the live objects by key. A record that
// does not decode (a key this process does not have) is an error: its owner is unknown.
func readConfigTopic(ctx context.Context, kafka KafkaSettings, topic string, keys *schemas.Keyring, logger zerolog.Logger) (map[string]currentObject, error) {
	out := map[string]currentObject{}
	bad := map[string]error{} // the last record of these keys does not decode
	reader, err := NewTopicReader(TopicReaderConfig{
		Kafka: kafka, Topic: topic, Logger: logger, ReadCommitted: true,
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
