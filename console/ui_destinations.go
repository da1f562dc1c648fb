package console

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// The destinations pages (the catalog, Segment's setup flow of a Webhooks destination, a
// destination's health, log, DLQ and test); the setup flow and the page's actions are in
// ui_destination_form.go. Every write goes through the service methods the API's handlers
// also call (the config write path of configwrite.go: createObject, checkNew, updateObject,
// removeObject; replay, runTest), so the pages and the API validate alike and show the same
// messages.

func (u *ui) destinationPages(pg func(string, http.HandlerFunc)) {
	pg("GET /destinations", u.destinations)
	pg("GET /destinations/new", u.destinationCatalog)
	pg("GET /destinations/new/webhooks", u.newDestination)
	pg("POST /destinations/new/webhooks", u.newDestinationStep)
	pg("GET /destinations/{id}", u.destination)
	pg("POST /destinations/{id}/enabled", u.enableDestination)
	pg("POST /destinations/{id}/edit", u.editDestination)
	pg("POST /destinations/{id}/delete", u.deleteDestination)
	pg("POST /destinations/{id}/dlq/replay", u.replayDestination)
	pg("POST /destinations/{id}/test", u.testDestinationPage)
	pg("GET /destinations/{id}/attempts/{seq}", u.destinationAttempt)
}

func (u *ui) destinations(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "destinations", page{Title: "Destinations", Nav: "destinations", Data: u.destinationRows()})
}

func (u *ui) destinationCatalog(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "destination_new", page{Title: "Add a destination", Nav: "destinations"})
}

// destinationData is a destination page's data.
type destinationData struct {
	D             *schemas.Destination
	Version       int64
	ManagedByFile bool
	URLs          []string

	Window                     string // 1h or 24h
	Stats                      stats
	Health                     views.HealthStats // its messages (health_api.go)
	Failing                    bool              // judged as the overview does (judge)
	Why                        string
	URLProblems                []problem
	Funnel                     funnelView
	SuccessChart, LatencyChart template.HTML
	Points                     []point // with attempts, for the charts' table

	Log        []logRow
	Status     string
	Statuses   []string
	Cursor     string
	NextCursor string
	KeptPerURL int

	DLQ        []deadLetterView
	DLQPending int
	DLQError   string

	TestTypes []string
	TestType  string
	Test      *testOutcome
	TestError string

	Edit *destForm
}

// logRow is one attempt of the delivery log, with its time in two parts (short on a phone).
type logRow struct {
	attempt
	Clock, Day string
}

// logPage is how many attempts a page of the delivery log shows.
const logPage = 50

// destinationData reads a destination page's data; the query picks the window, the log's
// status filter and page.
func (u *ui) destinationData(ctx context.Context, id string, q url.Values) (*destinationData, error) {
	snap := u.s.deps.Store.Snapshot()
	d, ok := snap.DestinationByID(id)
	if !ok {
		return nil, errNotFound("There is no destination %q.", id)
	}
	data := &destinationData{D: d, Version: snap.Revision(schemas.ConfigKindDestination, id), ManagedByFile: strings.HasPrefix(d.Origin, schemas.OriginFilePrefix),
		Window: "1h", Statuses: statusFilters, TestTypes: testTypes, TestType: schemas.TypeTrack, KeptPerURL: u.s.cfg.AttemptsPerDestination}
	for _, wh := range d.Settings.Webhooks {
		data.URLs = append(data.URLs, schemas.MaskURL(wh.URL)) // credentials are write-only (secrets.go)
	}
	window, step := time.Hour, time.Minute
	if q.Get("window") == "24h" {
		data.Window, window, step = "24h", 24*time.Hour, 10*time.Minute
	}
	data.Stats = u.s.statsOf(id, window, step)
	data.Health = u.s.healthOf(d, window)
	data.Failing, data.Why = judge(data.Health, data.Window)
	if !data.Failing {
		data.URLProblems = urlProblems(d, data.Health, data.Window)
	}
	data.Funnel = funnelOf(id, data.Window, u.s.health.Funnel(id, u.s.now(), window))
	data.SuccessChart = successChart(data.Stats, data.Window)
	data.LatencyChart = latencyChart(data.Stats, data.Window)
	for _, p := range data.Stats.Series {
		if p.Attempts > 0 {
			data.Points = append(data.Points, p)
		}
	}
	// The delivery log, newest first: as GET /v1/destinations/{id}/attempts.
	if s := q.Get("status"); slices.Contains(statusFilters, s) {
		data.Status = s
	}
	var before uint64 = math.MaxUint64
	if c, err := strconv.ParseUint(q.Get("cursor"), 10, 64); err == nil {
		before, data.Cursor = c, q.Get("cursor")
	}
	log, next := u.s.attemptsPage(id, before, data.Status, logPage)
	for _, a := range log {
		data.Log = append(data.Log, logRow{attempt: a, Clock: a.At.UTC().Format("15:04:05"), Day: a.At.UTC().Format("2006-01-02")})
	}
	data.NextCursor = next
	// The DLQ: read from webhooks.dlq only when the DLQ view counts dead letters.
	data.DLQPending = u.s.dlq.Pending(id)
	if data.DLQPending > 0 {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		dls, err := u.s.deadLetters(dctx, id, false)
		cancel()
		if err != nil {
			data.DLQError = "The dead letters could not be read: " + err.Error()
		}
		data.DLQ = dls
	}
	data.Edit = u.editForm(d, data.Version)
	return data, nil
}

// attemptData is an attempt's page: the request as sent, and the answer.
type attemptData struct {
	D          *schemas.Destination
	A          attempt
	Headers    [][2]string // the request's headers, in order
	Static     int         // how many of them are the URL's static headers (the last ones)
	Body       string      // the delivered body's exact bytes, when the console still has the message
	Pretty     string      // the body indented for reading
	BodyNote   string      // why there is no body
	Redelivery bool
}

// destinationAttempt shows one attempt of the log: the request's headers and body (rebuilt from
// the source's recent events the console keeps, as the router builds it) and the answer.
func (u *ui) destinationAttempt(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, ok := u.s.deps.Store.Snapshot().DestinationByID(id)
	if !ok {
		u.fail(w, r, errNotFound("There is no destination %q.", id))
		return
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	var a *attempt
	if err == nil {
		if got, ok := u.s.attempts.Attempt(id, seq); ok {
			a = &got
		}
	}
	if a == nil {
		u.fail(w, r, errNotFound("Attempt %s of destination %s is not in the delivery log (it keeps the last %d attempts per destination).",
			r.PathValue("seq"), id, u.s.cfg.AttemptsPerDestination))
		return
	}
	data := &attemptData{D: d, A: *a}
	body := u.deliveredBody(d, a.MessageID)
	switch {
	case body != nil:
		data.Body, data.Pretty = string(body), fmtPretty(body)
	case a.Test:
		data.BodyNote = "A test event's body is not kept: send another test event to see one (the test form shows the body)."
	default:
		data.BodyNote = fmt.Sprintf("The body is no longer in the console's memory (it keeps the last %d events per source).", u.s.cfg.RecentEvents)
	}
	data.Headers = [][2]string{{"User-Agent", "Tributary/1.0"}, {"Content-Type", "application/json"}, {schemas.HeaderXMessageID, a.MessageID}}
	if secret := d.Settings.SharedSecret; secret != "" {
		sig := "… (computed per body: the lowercase hex HMAC-SHA1 of the body under the shared secret)"
		if body != nil {
			sig = schemas.XSignature(secret, body)
		}
		data.Headers = append(data.Headers, [2]string{schemas.HeaderXSignature, sig})
		if d.Settings.StandardWebhooks {
			data.Headers = append(data.Headers, [2]string{schemas.HeaderWebhookID, a.MessageID},
				[2]string{schemas.HeaderWebhookTimestamp, "… (Unix seconds of the request)"},
				[2]string{schemas.HeaderWebhookSignature, "v1,… (HMAC-SHA256 of id, timestamp and body)"})
		}
	}
	for _, wh := range d.Settings.Webhooks {
		if schemas.RedactURL(wh.URL) == a.URL || wh.URL == a.URL {
			for _, name := range sortedKeys(wh.Headers) {
				data.Headers = append(data.Headers, [2]string{name, schemas.MaskSecret(wh.Headers[name])})
				data.Static++
			}
			break
		}
	}
	u.render(w, r, http.StatusOK, "destination_attempt", page{Title: "Attempt " + r.PathValue("seq") + " of " + id, Nav: "destinations", Data: data})
}

// deliveredBody rebuilds the body delivered for messageID from the recent events of the
// destination's sources (nil when the console no longer has it): the router's own code.
func (u *ui) deliveredBody(d *schemas.Destination, messageID string) []byte {
	if messageID == "" {
		return nil
	}
	raw := u.s.events.Delivered(d.Sources, messageID)
	if raw == nil {
		return nil
	}
	v, err := schemas.DecodeRoutingView(raw)
	if err != nil {
		return nil
	}
	return schemas.AppendWebhookBodyFromEvent(nil, raw, &v)
}
