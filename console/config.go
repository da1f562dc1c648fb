package console

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	passwordvalidator "github.com/wagslane/go-password-validator"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config is the console's configuration. Start from DefaultConfig; ConfigFromEnv applies the
// environment (the fields tagged env; docs/configuration.md#run-time-settings).
type Config struct {
	// Addr is where the API, /healthz, /readyz and /metrics listen (CONSOLE_ADDR).
	Addr string `env:"CONSOLE_ADDR" doc:"listen address of the console: its web UI at '/' and admin API under '/v1/' ([console.md](console.md)), '/healthz', '/readyz', and '/metrics' unless 'METRICS_ADDR' is set; the images set '0.0.0.0:8090'"`
	// IngestURL is the tracking API's address as clients reach it, for the first event's curl
	// the UI shows (CONSOLE_INGEST_URL).
	IngestURL string `env:"CONSOLE_INGEST_URL" doc:"the tracking API's URL as clients reach it, shown in the console's 'curl' for a new source's first event; 'make run' sets its own"`
	// AudiencesURL is the audiences service's profile API as the console reaches it, for the
	// audiences pages' member counts, previews and profile lookups (CONSOLE_AUDIENCES_URL).
	AudiencesURL string `env:"CONSOLE_AUDIENCES_URL" doc:"the audiences service's profile API as the console reaches it, for the audiences pages' member counts, live previews and profile lookups; 'make run' sets its own"`
	// AudiencesToken is the profile API's bearer token (AUDIENCES_TOKEN, as the audiences
	// service reads it; documented there).
	AudiencesToken string `env:"AUDIENCES_TOKEN" docDefault:"required ('make run': generated per 'DATA_DIR')"`
	// AllowedHosts are the host names the UI and the API answer to (CONSOLE_ALLOWED_HOSTS,
	// comma-separated; docs/security.md#dns-rebinding); others get 421. Empty: the loopback
	// names when CONSOLE_ADDR is on loopback, any name otherwise.
	AllowedHosts []string `env:"CONSOLE_ALLOWED_HOSTS" doc:"comma-separated host names the console's UI and API answer to (its Ingress host, its Service name, an IP address; '*': any): a request with another 'Host' is answered 421, '/healthz', '/readyz' and '/metrics' excepted; 'localhost', '127.0.0.1' and '[::1]' are always accepted. Empty: only those when 'CONSOLE_ADDR' is on loopback, any name otherwise ([security.md](security.md#dns-rebinding))"`
	// Token is the bearer token of the API (CONSOLE_TOKEN): required.
	Token string `env:"CONSOLE_TOKEN" docDefault:"required ('make run': generated per 'DATA_DIR')" doc:"bearer token of the admin API ('Authorization: Bearer ...') and the web UI's sign-in; the console refuses to start without it, or with a weak one (under 16 characters or about 64 bits: 'openssl rand -hex 32' makes a good one). 'make run' uses it when set, else generates one and keeps it in 'DATA_DIR/console-token' (mode 0600), whose path it prints"`
	// OIDC is sign-in with OpenID Connect (docs/console.md#single-sign-on); off while its
	// issuer is empty.
	OIDC OIDCConfig
	// TokenFile is where the token is kept, for the sign-in page's help (make run: the
	// console-token file of its DATA_DIR); empty: it names CONSOLE_TOKEN only.
	TokenFile string

	// MaxStreams bounds the live event streams open on the console (CONSOLE_MAX_STREAMS).
	MaxStreams int `env:"CONSOLE_MAX_STREAMS" doc:"most live event streams (the source debugger's Server-Sent Events, UI and API together) the console keeps open; one more is refused with 429 ([console.md](console.md#live-stream-limits))"`
	// MaxStreamsPerSession bounds the live streams of one UI session, and those of the API's
	// callers together (CONSOLE_MAX_STREAMS_PER_SESSION).
	MaxStreamsPerSession int `env:"CONSOLE_MAX_STREAMS_PER_SESSION" doc:"most live event streams of one signed-in browser session, and of the admin API's callers together (they share 'CONSOLE_TOKEN'); one more is refused"`
	// StreamWriteTimeout bounds each write to a live stream: a client that stops reading is
	// dropped after it.
	StreamWriteTimeout time.Duration

	// Topic names; tests on a shared broker override them.
	ConfigTopic, EventsTopic, RejectedTopic, DeletionsTopic, DeletionsStatusTopic string
	AttemptsTopic, DeliveriesTopic, DLQTopic, DLQReplayedTopic                    string
	SessionsTopic                                                                 string
	// RetriedNowTopic holds the retry-now marks (docs/delivery.md#retry-now): the pending view
	// reads it beside the retry tiers.
	RetriedNowTopic string
	// NoticesTopic holds the auto-disable notices (docs/delivery.md#auto-disable), shown in
	// the overview's problems.
	NoticesTopic string
	// AuditTopic is the audit trail (docs/console.md#audit-trail).
	AuditTopic string
	// AuditWindow is how many of the latest audit records the console keeps in memory for
	// GET /v1/audit and the audit page (the export reads the topic).
	AuditWindow int
	// SuppressionsTopic is read (with DeletionsStatusTopic) before a DLQ replay: a deleted or
	// suppressed user's dead letters are skipped (docs/console.md#replay-the-dead-letter-queue).
	SuppressionsTopic string
	// DelivererGroup is the deliverer's consumer group: its lag on the retry tiers is the
	// overview's backlog.
	DelivererGroup string
	// RegulationStores are the stores that must report on every subject of a regulation
	// before it is FINISHED (CONSOLE_REGULATION_STORES, comma-separated;
	// docs/console.md#regulations).
	RegulationStores []string `env:"CONSOLE_REGULATION_STORES" doc:"comma-separated stores that must report on every subject of a regulation (on 'tracking.deletions.status') before it is 'FINISHED': 'router' (always), 'audiences' (remove it where the audiences service does not run), 'deliverer', 'console' ([console.md](console.md#regulations))"`

	// AttemptsPerDestination is how many attempts the delivery log keeps per destination.
	AttemptsPerDestination int
	// PendingPerDestination is how many messages waiting in the retry tiers the pending view
	// keeps per destination (docs/console.md#pending-retries).
	PendingPerDestination int
	// MessagesPerDestination is how many messages (with their attempts) the messages view
	// keeps per destination, and MessageBytesPerDestination how many bytes of attempts and
	// answers at most (docs/console.md#messages).
	MessagesPerDestination, MessageBytesPerDestination int
	// DLQPerDestination is how many dead letters (their headers) the DLQ lists keep per
	// destination.
	DLQPerDestination int
	// StatsWindow is how far back the per-minute delivery counters go (and how far back the
	// console reads webhooks.attempts when it starts).
	StatsWindow time.Duration
	// HealthMessages bounds the messages whose state the health view keeps, across
	// destinations (about 90 bytes each; docs/console.md#views-and-their-limits).
	HealthMessages int
	// RecentEvents is how many events (accepted or rejected) the debugger keeps per source.
	RecentEvents int
	// EventsBackfill is how many records per partition of tracking.events and
	// tracking.rejected the console reads back when it starts, to refill the recent events.
	EventsBackfill int64
	// MaxKeyOverlap bounds the overlap of a write-key rotation.
	MaxKeyOverlap time.Duration
	// TestTimeout bounds how long a destination test waits for its attempts.
	TestTimeout time.Duration
	// ShutdownTimeout bounds the stop after SIGTERM (SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT"`
}

// OIDCConfig is sign-in with OpenID Connect (docs/console.md#single-sign-on).
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (CONSOLE_OIDC_ISSUER); empty: single sign-on is off.
	Issuer string `env:"CONSOLE_OIDC_ISSUER" doc:"issuer URL of an OpenID Connect provider (its '/.well-known/openid-configuration' is read at the first sign-in): the sign-in page offers 'Sign in with <name>' beside the token; 'https' unless on loopback. Empty: single sign-on is off ([console.md](console.md#single-sign-on))"`
	// Name is what the sign-in button says: "Sign in with <Name>" (CONSOLE_OIDC_NAME).
	Name string `env:"CONSOLE_OIDC_NAME" docDefault:"the issuer's host" doc:"the provider's name on the sign-in button ('Sign in with <name>')"`
	// ClientID and ClientSecret are the console's client at the provider.
	ClientID     string `env:"CONSOLE_OIDC_CLIENT_ID" doc:"client id of the console at the provider (required with 'CONSOLE_OIDC_ISSUER'); the ID token's audience must be it"`
	ClientSecret string `env:"CONSOLE_OIDC_CLIENT_SECRET" secret:"true" doc:"client secret of the console at the provider; empty for a public client (PKCE is always used); never logged"`
	// RedirectURL is the callback the provider sends the browser back to.
	RedirectURL string `env:"CONSOLE_OIDC_REDIRECT_URL" doc:"the console's callback as the browser reaches it, registered at the provider: 'https://<console host>/oidc/callback'. Empty: built from each request's 'Host' (and 'https' when the request came over TLS or 'X-Forwarded-Proto: https')"`
	// Scopes are asked for, space-separated; openid is required.
	Scopes string `env:"CONSOLE_OIDC_SCOPES" doc:"scopes asked for, space-separated; must include 'openid'; add the one that makes your provider send groups (e.g. 'groups') if it needs one"`
	// GroupsClaim is the ID token's claim holding the person's groups.
	GroupsClaim string `env:"CONSOLE_OIDC_GROUPS_CLAIM" doc:"the ID token's claim holding the person's groups (a list of strings, or one string)"`
	// Roles maps groups to roles: "admin=g1,g2;editor=g3;viewer=*" (parseOIDCRoles).
	Roles string `env:"CONSOLE_OIDC_ROLES" doc:"groups to roles: '<role>=<group>,<group>;<role>=...' with roles 'admin', 'editor', 'viewer', e.g. 'admin=platform-admins;editor=growth,marketing;viewer=*' ('*': anyone the provider signs in with a verified email); a person in groups of several roles gets the highest. People in none are refused unless the console's user list names them ([console.md](console.md#single-sign-on))"`
	// PIIGroups are the groups granted PII access ("*": everyone signed in through OIDC).
	PIIGroups []string `env:"CONSOLE_OIDC_PII_GROUPS" doc:"comma-separated groups whose members see message bodies, user ids and traits unmasked ('*': everyone the role mapping admits); others see them masked"`
}

// DefaultConfig returns the defaults of docs/console.md.
func DefaultConfig() Config {
	return Config{
		Addr:                       "127.0.0.1:8090",
		IngestURL:                  "http://127.0.0.1:8080",
		AudiencesURL:               "http://127.0.0.1:8091",
		ConfigTopic:                schemas.TopicConfig,
		EventsTopic:                schemas.TopicEvents,
		RejectedTopic:              schemas.TopicRejected,
		DeletionsTopic:             schemas.TopicDeletions,
		DeletionsStatusTopic:       schemas.TopicDeletionsStatus,
		AttemptsTopic:              schemas.TopicAttempts,
		DeliveriesTopic:            schemas.TopicDeliveries,
		DLQTopic:                   schemas.TopicDLQ,
		DLQReplayedTopic:           schemas.TopicDLQReplayed,
		SessionsTopic:              schemas.TopicSessions,
		RetriedNowTopic:            schemas.TopicRetriedNow,
		NoticesTopic:               schemas.TopicNotices,
		AuditTopic:                 schemas.TopicAudit,
		AuditWindow:                50_000,
		PendingPerDestination:      10000,
		SuppressionsTopic:          schemas.TopicSuppressions,
		DelivererGroup:             "tributary-deliverer",
		RegulationStores:           []string{schemas.StoreRouter, schemas.StoreAudiences, schemas.StoreDeliverer, schemas.StoreConsole},
		AttemptsPerDestination:     1000,
		MessagesPerDestination:     10000,
		MessageBytesPerDestination: 32 << 20,
		DLQPerDestination:          10000,
		StatsWindow:                24 * time.Hour,
		HealthMessages:             100_000,
		RecentEvents:               100,
		EventsBackfill:             2000,
		MaxKeyOverlap:              30 * 24 * time.Hour,
		TestTimeout:                15 * time.Second,
		MaxStreams:                 100,
		MaxStreamsPerSession:       5,
		StreamWriteTimeout:         10 * time.Second,
		ShutdownTimeout:            platform.DefaultShutdownGrace,
		OIDC:                       OIDCConfig{Scopes: "openid email profile", GroupsClaim: "groups"},
	}
}

// ConfigFromEnv returns DefaultConfig with the process environment applied, validated.
func ConfigFromEnv() (Config, error) { return ConfigFromEnviron(nil) }

// ConfigFromEnviron is ConfigFromEnv reading environ instead of the process environment; nil
// reads the process environment.
func ConfigFromEnviron(environ map[string]string) (Config, error) {
	return platform.LoadSettings(DefaultConfig(), environ)
}

// Token strength (docs/security.md#the-console-token): at least minTokenLength characters,
// minTokenDistinct distinct ones, and an estimated minTokenBits bits of entropy, so that a
// token made by hand ("aaaaaaaaaaaaaaaa", "1234567890123456") is refused.
const (
	minTokenLength   = 16
	minTokenDistinct = 6
	minTokenBits     = 64
)

// checkTokenStrength returns an error naming CONSOLE_TOKEN, never showing the token, when it is
// too short or too guessable. The entropy is estimated as go-password-validator does: the
// length, less the repeats and the runs of a sequence (digits, the alphabet, keyboard rows),
// times the bits of the character classes used.
func checkTokenStrength(token string) error {
	const how = "generate one with `openssl rand -hex 32`"
	if n := utf8.RuneCountInString(token); n < minTokenLength {
		return fmt.Errorf("CONSOLE_TOKEN: must be at least %d characters, got %d: %s", minTokenLength, n, how)
	}
	distinct := map[rune]bool{}
	for _, r := range token {
		distinct[r] = true
	}
	if bits := passwordvalidator.GetEntropy(token); len(distinct) < minTokenDistinct || bits < minTokenBits {
		return fmt.Errorf("CONSOLE_TOKEN: too easy to guess (about %.0f bits, %d distinct characters; at least %d bits and %d distinct characters are required): %s",
			bits, len(distinct), minTokenBits, minTokenDistinct, how)
	}
	return nil
}

// checkRegulationStores: the router is always expected (its report is the delete notices
// sent); a store's name is lower-case letters; no store twice.
func checkRegulationStores(stores []string) error {
	if !slices.Contains(stores, schemas.StoreRouter) {
		return fmt.Errorf("CONSOLE_REGULATION_STORES: must include %s, got %q", schemas.StoreRouter, stores)
	}
	for i, st := range stores {
		if st == "" || strings.Trim(st, "abcdefghijklmnopqrstuvwxyz-") != "" {
			return fmt.Errorf("CONSOLE_REGULATION_STORES: %q is not a store name (lower-case letters)", st)
		}
		if slices.Contains(stores[:i], st) {
			return fmt.Errorf("CONSOLE_REGULATION_STORES: %s given twice", st)
		}
	}
	return nil
}

// Validate returns every unusable field, each naming its variable.
func (c *Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("CONSOLE_ADDR: must not be empty"))
	}
	switch {
	case c.Token == "":
		errs = append(errs, errors.New("CONSOLE_TOKEN: required: the bearer token of the admin API (e.g. CONSOLE_TOKEN=$(openssl rand -hex 32)); `make run` generates one"))
	default:
		if err := checkTokenStrength(c.Token); err != nil {
			errs = append(errs, err)
		}
	}
	if err := platform.ValidateAllowedHosts("CONSOLE_ALLOWED_HOSTS", c.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	for _, t := range []string{c.ConfigTopic, c.EventsTopic, c.RejectedTopic, c.DeletionsTopic, c.DeletionsStatusTopic, c.AttemptsTopic, c.DeliveriesTopic, c.DLQTopic, c.DLQReplayedTopic, c.SessionsTopic, c.SuppressionsTopic, c.RetriedNowTopic, c.NoticesTopic} {
		if t == "" {
			errs = append(errs, errors.New("console topics: names must not be empty"))
			break
		}
	}
	if err := checkRegulationStores(c.RegulationStores); err != nil {
		errs = append(errs, err)
	}
	if c.AttemptsPerDestination < 1 || c.MessagesPerDestination < 1 || c.MessageBytesPerDestination < 1 || c.DLQPerDestination < 1 || c.PendingPerDestination < 1 || c.RecentEvents < 1 || c.EventsBackfill < 0 {
		errs = append(errs, errors.New("console view sizes: must be positive"))
	}
	if c.HealthMessages < 1 {
		errs = append(errs, fmt.Errorf("console health messages: must be positive, got %d", c.HealthMessages))
	}
	if c.StatsWindow < time.Hour {
		errs = append(errs, fmt.Errorf("console stats window: must be at least 1h, got %s", c.StatsWindow))
	}
	if c.MaxStreams < 1 {
		errs = append(errs, fmt.Errorf("CONSOLE_MAX_STREAMS: must be at least 1, got %d", c.MaxStreams))
	}
	if c.MaxStreamsPerSession < 1 {
		errs = append(errs, fmt.Errorf("CONSOLE_MAX_STREAMS_PER_SESSION: must be at least 1, got %d", c.MaxStreamsPerSession))
	}
	if c.TestTimeout <= 0 || c.MaxKeyOverlap < 0 || c.StreamWriteTimeout <= 0 {
		errs = append(errs, errors.New("console timeouts: must be positive"))
	}
	if err := c.OIDC.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: must be positive, got %s", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
