package audiences

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config is the audiences service's configuration. Start from DefaultConfig; ConfigFromEnv
// applies the environment (the fields tagged env; docs/configuration.md#run-time-settings).
type Config struct {
	// Topic names; tests on a shared broker override them.
	EventsTopic, DeletionsTopic, StateTopic, RepartitionTopic string
	// DeletionsStatusTopic gets the service's report on each deletion request
	// (schemas.DeletionReport, docs/audiences.md#deletion-and-suppression).
	DeletionsStatusTopic string
	// Group consumes tracking.events and audiences.repartition together (the range balancer
	// gives a member the same partitions of both); DeletionsGroup forwards tracking.deletions.
	Group, DeletionsGroup string
	// SyncInterval is how often each audience and computed trait is synced
	// (AUDIENCE_SYNC_INTERVAL).
	SyncInterval time.Duration `env:"AUDIENCE_SYNC_INTERVAL" doc:"how often every audience and computed trait is synced: changes since the last sync are sent as identify calls ([audiences.md](audiences.md#sync))"`
	// Addr is where the profile API, /healthz, /readyz and /metrics listen (AUDIENCES_ADDR).
	Addr string `env:"AUDIENCES_ADDR" doc:"listen address of the profile API (and of '/healthz', '/readyz', and '/metrics' unless 'METRICS_ADDR' is set); the images set '0.0.0.0:8091'"`
	// Token is the bearer token of the profile API (AUDIENCES_TOKEN): required, at least 16
	// characters; `make run` generates one per DATA_DIR.
	Token string `env:"AUDIENCES_TOKEN" docDefault:"required ('make run': generated per 'DATA_DIR')" doc:"bearer token of the profile API ('Authorization: Bearer ...'), at least 16 characters; the audiences service refuses to start without it, and the console needs the same value to show member counts, previews and profiles. 'make run' uses it when set, else generates one, keeps it in 'DATA_DIR/audiences-token' and gives it to the console"`
	// AllowedHosts are the host names the profile API answers to (AUDIENCES_ALLOWED_HOSTS,
	// comma-separated; docs/security.md#dns-rebinding); others get 421. Empty: the loopback
	// names when AUDIENCES_ADDR is on loopback, any name otherwise.
	AllowedHosts []string `env:"AUDIENCES_ALLOWED_HOSTS" doc:"comma-separated host names the profile API answers to (a Service name, '*.<headless Service>' for the peers, an IP address; '*': any): a request with another 'Host' is answered 421, '/healthz', '/readyz' and '/metrics' excepted; 'localhost', '127.0.0.1' and '[::1]' are always accepted. Empty: only those when 'AUDIENCES_ADDR' is on loopback, any name otherwise ([security.md](security.md#dns-rebinding))"`
	// PeerURL is how an instance reaches another's profile API to forward a request for a
	// user it does not own: a URL with "{instance}", replaced by the owner's
	// AUDIENCES_TRANSACTIONAL_ID (AUDIENCES_PEER_URL, e.g. the StatefulSet's
	// "http://{instance}.tributary-audiences:8091"). Empty: not forwarded (503 naming the
	// owner).
	PeerURL string `env:"AUDIENCES_PEER_URL" doc:"URL of another instance's profile API, '{instance}' standing for its 'AUDIENCES_TRANSACTIONAL_ID' (the chart sets it); empty: a request for a user another instance owns is answered 503"`
	// TransactionalID is the transactional id and static member id of the instance
	// (AUDIENCES_TRANSACTIONAL_ID): unique per instance, stable across its restarts.
	TransactionalID string `env:"AUDIENCES_TRANSACTIONAL_ID" doc:"transactional id and static member id: unique per instance, stable across its restarts (a StatefulSet pod name)"`
	// TransactionTimeout bounds how long a transaction left open by a crashed instance
	// blocks its partitions (AUDIENCES_TRANSACTION_TIMEOUT).
	TransactionTimeout time.Duration `env:"AUDIENCES_TRANSACTION_TIMEOUT" doc:"how long a transaction left open by a crashed audiences instance blocks its partitions; at least '1s'"`
	// MaxPollRecords bounds one poll, hence one transaction.
	MaxPollRecords int
	// MaxChangesPerTransaction bounds the identify calls one sync transaction emits; a
	// partition with more changes goes on in the next transaction.
	MaxChangesPerTransaction int
	// ShutdownTimeout bounds the stop after SIGTERM (SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT"`

	// Segment's Profile API (docs/audiences.md#segment-profile-api).
	//
	// SpaceID is the only {space} its paths accept (AUDIENCES_SPACE_ID); empty: any.
	SpaceID string `env:"AUDIENCES_SPACE_ID" doc:"the '{space}' the Segment Profile API's paths must name ('/v1/spaces/{space}/collections/users/...'); empty: any value ([audiences.md](audiences.md#segment-profile-api))"`
	// ProfileAPIRate bounds the Segment Profile API's requests per second on each instance
	// (AUDIENCES_PROFILE_API_RATE, a token bucket of one second's requests); 0: no limit.
	ProfileAPIRate int `env:"AUDIENCES_PROFILE_API_RATE" doc:"requests per second the Segment Profile API answers on each instance before answering 429 ('Retry-After: 1'); Segment's is 100 per space; 0: no limit ([audiences.md](audiences.md#segment-profile-api))"`
	// ProfileEvents is how many recent track events each profile keeps for the Profile API's
	// /events (AUDIENCES_PROFILE_EVENTS); 0: none (no memory, nothing on audiences.state).
	ProfileEvents int `env:"AUDIENCES_PROFILE_EVENTS" doc:"how many recent track events each profile keeps (in memory and on 'audiences.state') for the Segment Profile API's '/events'; about 200 bytes each; 0: none ([audiences.md](audiences.md#profile-events))"`
	// ProfileEventsLookback is how old a kept event may be (AUDIENCES_PROFILE_EVENTS_LOOKBACK).
	ProfileEventsLookback time.Duration `env:"AUDIENCES_PROFILE_EVENTS_LOOKBACK" doc:"how far back the Segment Profile API's '/events' reaches: older kept events are dropped; Segment's is 14 days ([audiences.md](audiences.md#profile-events))"`

	// Identity resolution rules (docs/audiences.md#identity-resolution), Segment's defaults.
	//
	// IdentityExternalIDs: profiles are linked by their external ids (email,
	// context.externalIds) (AUDIENCES_IDENTITY_EXTERNAL_IDS); false: by userId and anonymousId
	// only, as before.
	IdentityExternalIDs bool `env:"AUDIENCES_IDENTITY_EXTERNAL_IDS" doc:"link profiles by their external ids too: the 'email' of identify traits and of 'context.traits', and the entries of 'context.externalIds' (each id costs a small entry in memory and on 'audiences.state'); false: by 'userId' and 'anonymousId' only ([audiences.md](audiences.md#identity-resolution))"`
	// IdentityBlocked: an id matching it never links profiles (AUDIENCES_IDENTITY_BLOCKED).
	IdentityBlocked string `env:"AUDIENCES_IDENTITY_BLOCKED" docDefault:"Segment's blocked values, any case: empty, zeroes and dashes, '-1', 'null', 'nil', 'none', 'undefined', 'anonymous', 'unknown' ('audiences.DefaultIdentityBlocked')" doc:"regular expression (Go syntax) of id values that never link or merge profiles (an email, an entry of 'context.externalIds', an 'anonymousId' or 'previousId' of an identified message); each refusal is recorded on the profile ([audiences.md](audiences.md#identity-resolution))"`
	// IdentityLimits: the most ids of a type a profile holds, "type:n" comma-separated, "*"
	// for the other types (AUDIENCES_IDENTITY_LIMITS).
	IdentityLimits string `env:"AUDIENCES_IDENTITY_LIMITS" doc:"most ids of each type a profile holds, 'type:n' comma-separated ('*': every other type); 'user_id' is always 1. An id over its limit is refused and recorded ([audiences.md](audiences.md#identity-resolution))"`
	// IdentityWindow: ids linked longer ago do not count towards the limits (0: ever).
	IdentityWindow time.Duration `env:"AUDIENCES_IDENTITY_WINDOW" doc:"ids linked longer ago than this do not count towards 'AUDIENCES_IDENTITY_LIMITS' ('user_id' excepted); '0s': ever"`
	// IdentityPriority: the id types, highest priority first; a merge over a limit drops the
	// ids of the lower priority (AUDIENCES_IDENTITY_PRIORITY).
	IdentityPriority []string `env:"AUDIENCES_IDENTITY_PRIORITY" doc:"id types, highest priority first (unlisted types come last): when a merge would put a profile over a limit, the id of lower priority is dropped and recorded ([audiences.md](audiences.md#identity-resolution))"`
	// IdentityMaxMerges bounds the merges of one profile (AUDIENCES_IDENTITY_MAX_MERGES).
	IdentityMaxMerges int `env:"AUDIENCES_IDENTITY_MAX_MERGES" doc:"most profiles merged into one; a merge beyond is refused and recorded"`
}

// DefaultIdentityBlocked is Segment's suggested blocked values: empty, zeroes and dashes, -1,
// null, anonymous (and the like of a client's placeholder).
const DefaultIdentityBlocked = `(?i)^(|[0-]*|-1|null|nil|none|undefined|anonymous|unknown)$`

// DefaultConfig returns the defaults of docs/audiences.md.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "local"
	}
	return Config{
		EventsTopic:              schemas.TopicEvents,
		DeletionsTopic:           schemas.TopicDeletions,
		StateTopic:               schemas.TopicAudiencesState,
		RepartitionTopic:         schemas.TopicAudiencesRepartition,
		DeletionsStatusTopic:     schemas.TopicDeletionsStatus,
		Group:                    "tributary-audiences",
		DeletionsGroup:           "tributary-audiences-deletions",
		SyncInterval:             time.Minute,
		Addr:                     "127.0.0.1:8091",
		TransactionalID:          "tributary-audiences-" + host,
		TransactionTimeout:       60 * time.Second,
		MaxPollRecords:           5000,
		MaxChangesPerTransaction: 20000,
		ShutdownTimeout:          platform.DefaultShutdownGrace,
		ProfileEventsLookback:    14 * 24 * time.Hour,
		IdentityExternalIDs:      true,
		IdentityBlocked:          DefaultIdentityBlocked,
		IdentityLimits:           "user_id:1,*:5",
		IdentityWindow:           0,
		IdentityPriority:         []string{"user_id", "email", "android.id", "android.idfa", "android.push_token", "anonymous_id", "ga_client_id", "ios.id", "ios.idfa", "ios.push_token"},
		IdentityMaxMerges:        100,
	}
}

// ConfigFromEnv returns DefaultConfig with the process environment applied, validated.
func ConfigFromEnv() (Config, error) { return ConfigFromEnviron(nil) }

// ConfigFromEnviron is ConfigFromEnv reading environ instead of the process environment; nil
// reads the process environment.
func ConfigFromEnviron(environ map[string]string) (Config, error) {
	return platform.LoadSettings(DefaultConfig(), environ)
}

// Validate returns every unusable field, each naming its variable.
func (c *Config) Validate() error {
	var errs []error
	if c.EventsTopic == "" || c.DeletionsTopic == "" || c.StateTopic == "" || c.RepartitionTopic == "" || c.DeletionsStatusTopic == "" {
		errs = append(errs, errors.New("audiences topics: names must not be empty"))
	}
	if c.Group == "" || c.DeletionsGroup == "" {
		errs = append(errs, errors.New("audiences groups: names must not be empty"))
	}
	if c.SyncInterval < time.Second {
		errs = append(errs, fmt.Errorf("AUDIENCE_SYNC_INTERVAL: must be at least 1s, got %s", c.SyncInterval))
	}
	if c.Addr == "" {
		errs = append(errs, errors.New("AUDIENCES_ADDR: must not be empty"))
	}
	switch {
	case c.Token == "":
		errs = append(errs, errors.New("AUDIENCES_TOKEN: required: the bearer token of the profile API, which holds personal data (e.g. AUDIENCES_TOKEN=$(openssl rand -hex 32)); give the console the same one; `make run` generates one"))
	case len(c.Token) < 16:
		errs = append(errs, fmt.Errorf("AUDIENCES_TOKEN: must be at least 16 characters, got %d", len(c.Token)))
	}
	if err := platform.ValidateAllowedHosts("AUDIENCES_ALLOWED_HOSTS", c.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	if c.PeerURL != "" && !strings.Contains(c.PeerURL, "{instance}") {
		errs = append(errs, fmt.Errorf("AUDIENCES_PEER_URL: must contain {instance}, got %q", c.PeerURL))
	}
	if c.TransactionalID == "" {
		errs = append(errs, errors.New("AUDIENCES_TRANSACTIONAL_ID: must not be empty"))
	}
	if c.TransactionTimeout < time.Second {
		errs = append(errs, fmt.Errorf("AUDIENCES_TRANSACTION_TIMEOUT: must be at least 1s, got %s", c.TransactionTimeout))
	}
	if c.MaxPollRecords < 1 || c.MaxChangesPerTransaction < 1 {
		errs = append(errs, errors.New("audiences batch limits: must be positive"))
	}
	if c.ProfileAPIRate < 0 {
		errs = append(errs, fmt.Errorf("AUDIENCES_PROFILE_API_RATE: must be 0 (no limit) or more, got %d", c.ProfileAPIRate))
	}
	if c.ProfileEvents < 0 || c.ProfileEvents > maxProfileEvents {
		errs = append(errs, fmt.Errorf("AUDIENCES_PROFILE_EVENTS: must be from 0 (none) to %d, got %d", maxProfileEvents, c.ProfileEvents))
	}
	if c.ProfileEventsLookback < time.Minute {
		errs = append(errs, fmt.Errorf("AUDIENCES_PROFILE_EVENTS_LOOKBACK: must be at least 1m, got %s", c.ProfileEventsLookback))
	}
	if _, err := compileRules(c, nil); err != nil {
		errs = append(errs, err)
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: must be positive, got %s", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
