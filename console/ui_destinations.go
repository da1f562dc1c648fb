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
// destination's page in tabs: health, messages, pending, dead letters, replay, test, filters,
// settings); the setup flow and the page's actions are in ui_destination_form.go. Every write goes through the service methods the API's handlers
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
	pg("POST /destinations/{id}/retry", u.retryPendingPage)
	pg("POST /destinations/{id}/test", u.testDestinationPage)
	pg("POST /destinations/{id}/filters", u.saveFilterPage)
	pg("POST /destinations/{id}/filters/test", u.testFiltersPage)
	pg("POST /destinations/{id}/replays", u.replayPage)
	pg("POST /destinations/{id}/replays/{replayId}/cancel", u.cancelReplayPage)
	pg("GET /destinations/{id}/attempts/{seq}", u.destinationAttempt)
	pg("GET /destinations/{id}/messages/{messageId}", u.messagePage)
	pg("POST /destinations/{id}/messages/{messageId}/retry", u.retryMessagePage)
	pg("POST /destinations/{id}/messages/{messageId}/replay", u.replayMessagePage)
}

func (u *ui) destinations(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "destinations", page{Title: "Destinations", Nav: "destinations", Data: u.destinationRows()})
}

func (u *ui) destinationCatalog(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "destination_new", page{Title: "Add a destination", Nav: "destinations"})
}

// The tabs of a destination page (?tab=; docs/console.md#the-web-ui): each its own template,
// ui/templates/destination/<tab>.html; links, so that they work without JavaScript.
const (
	tabHealth   = "health"
	tabMessages = "messages"
	tabPending  = "pending"
	tabDLQ      = "dlq"
	tabTest     = "test"
	tabFilters  = "filters" // ui_destination_filters.go
	tabSettings = "settings"
	tabReplay   = "replay" // ui_replays.go
)

// destinationTabs are the tabs in their order, with their labels.
var destinationTabs = []struct{ ID, Label string }{
	{tabHealth, "Health"}, {tabMessages, "Messages"}, {tabPending, "Pending"},
	{tabDLQ, "Dead letters"}, {tabReplay, "Replay"}, {tabTest, "Test"}, {tabFilters, "Filters"}, {tabSettings, "Settings"},
}

// destinationTab is the address of a tab of destination id's page.
func destinationTab(id, tab string) string {
	p := "/destinations/" + url.PathEscape(id)
	if tab == "" || tab == tabHealth {
		return p
	}
	return p + "?tab=" + url.QueryEscape(tab)
}

// tabLink is a tab of a destination page's navigation.
type tabLink struct {
	ID, Label, Href string
	Count           int // shown beside the label (dead letters)
}

// destinationData is a destination page's data: what every tab shows (the head and the
// navigation) and what the current tab shows.
type destinationData struct {
	// PIIMasked: the tab shows message content masked (docs/console.md#pii-access).
	PIIMasked     bool
	D             *schemas.Destination
	Version       int64
	ManagedByFile bool
	URLs          []string
	Tab           string
	Tabs          []tabLink

	Window                     string // 1h or 24h
	Stats                      stats
	Health                     views.HealthStats // its messages (health_api.go)
	Failing                    bool              // judged as the overview does (judge)
	Why                        string
	URLProblems                []problem
	Funnel                     funnelView
	SuccessChart, LatencyChart template.HTML
	Points                     []point // with attempts, for the charts' table

	// The Messages tab (ui_messages.go): the messages the search finds, or with ?view=attempts
	// the delivery log of attempts.
	Messages        []messageRow
	MessageStatuses []string
	Search          msgSearch
	SearchError     string
	SearchQuery     string // the tab with the search, from its newest message
	OlderHref       string // the next page
	AttemptLog      bool
	KeptMessages    int // how many messages the view keeps per destination

	Log        []logRow
	Status     string
	Statuses   []string
	Cursor     string
	NextCursor string
	KeptPerURL int

	Pending        []pendingRow // the messages waiting in the retry tiers (ui_pending.go)
	PendingNotKept int

	DLQ        []deadLetterView
	DLQPending int
	DLQError   string

	TestTypes []string
	TestType  string
	Test      *testOutcome
	TestError string

	FiltersTab *filtersTab // the filters' editor (ui_destination_filters.go)
	Filters    *filtersBox // and their tester

	Edit *destForm

	Replay *replayTab // the replay tab (ui_replays.go)
}

// logRow is one attempt of the delivery log, with its time in two parts (short on a phone).
type logRow struct {
	attempt
	Clock, Day string
}

// logPage is how many attempts a page of the delivery log shows.
const logPage = 50

// destinationData reads a destination page's data for the tab the query names (?tab=, health
// by default); the query also picks the window, the log's status filter and page, and the
// test whose answers the test tab shows (?test=, as the test form's redirect names it).
func (u *ui) destinationData(ctx context.Context, id string, q url.Values) (*destinationData, error) {
	snap := u.s.deps.Store.Snapshot()
	d, ok := snap.DestinationByID(id)
	if !ok {
		return nil, errNotFound("There is no destination %q.", id)
	}
	data := &destinationData{D: d, Version: snap.Revision(schemas.ConfigKindDestination, id), ManagedByFile: strings.HasPrefix(d.Origin, schemas.OriginFilePrefix),
		Tab: tabHealth, Window: "1h", Statuses: statusFilters, TestTypes: testTypes, TestType: schemas.TypeTrack, KeptPerURL: u.s.cfg.AttemptsPerDestination}
	if t := q.Get("tab"); slices.ContainsFunc(destinationTabs, func(tab struct{ ID, Label string }) bool { return tab.ID == t }) {
		data.Tab = t
	}
	data.DLQPending = u.s.dlq.Pending(id)
	for _, t := range destinationTabs {
		link := tabLink{ID: t.ID, Label: t.Label, Href: destinationTab(id, t.ID)}
		switch t.ID {
		case tabDLQ:
			link.Count = data.DLQPending
		case tabPending:
			link.Count = u.s.pending.Count(id, u.s.now())
		}
		data.Tabs = append(data.Tabs, link)
	}
	for _, wh := range d.Settings.Webhooks {
		data.URLs = append(data.URLs, schemas.MaskURL(wh.URL)) // credentials are write-only (secrets.go)
	}
	switch data.Tab {
	case tabHealth:
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
	case tabMessages:
		u.messagesTab(data, id, q, u.s.maskFor(ctx))
	case tabPending:
		data.Pending, data.PendingNotKept = u.pendingRows(id)
	case tabDLQ:
		// Read from webhooks.dlq only when the DLQ view counts dead letters.
		if data.DLQPending > 0 {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			dls, err := u.s.deadLetters(dctx, id, false)
			cancel()
			if err != nil {
				data.DLQError = "The dead letters could not be read: " + err.Error()
			}
			data.DLQ = dls
		}
	case tabReplay:
		mask := u.s.maskFor(ctx)
		data.Replay, data.PIIMasked = u.replayTabOf(id, q, mask), mask.masks()
	case tabTest:
		if typ := q.Get("type"); slices.Contains(testTypes, typ) {
			data.TestType = typ
		}
		data.Test = u.testAnswers(d, q)
	case tabFilters:
		data.FiltersTab = filtersTabOf(d, data.Version)
	}
	data.Edit = u.editForm(d, data.Version)
	return data, nil
}

// testAnswers is the outcome of the test the query names (?test=<messageId>&type=&at=, the
// test form's redirect): what each URL answered, as the delivery log holds it now (a URL
// whose attempt is not logged yet is "pending": a reload shows it), and the body sent, built
// again from the same message id, type and time. Nil when the query names no test.
func (u *ui) testAnswers(d *schemas.Destination, q url.Values) *testOutcome {
	messageID, typ := q.Get("test"), q.Get("type")
	at, err := schemas.ParseTimestamp(q.Get("at"))
	if !strings.HasPrefix(messageID, testMessagePrefix) || !slices.Contains(testTypes, typ) || err != nil {
		return nil
	}
	body, err := testBody(typ, messageID, at)
	if err != nil {
		return nil
	}
	got := map[string][]attempt{}
	for _, a := range u.s.attempts.OfMessage(messageID) {
		if a.DestinationID == d.ID {
			got[a.URL] = append(got[a.URL], a)
		}
	}
	out := &testOutcome{MessageID: messageID, Type: typ, Body: body, At: at}
	for _, wh := range d.Settings.Webhooks {
		addr := schemas.RedactURL(wh.URL)
		if as := got[addr]; len(as) > 0 {
			a := as[0]
			got[addr] = as[1:]
			out.Results = append(out.Results, testResult{URL: addr, Status: a.Status, LatencyMs: a.LatencyMs, ErrorClass: a.ErrorClass, Error: a.Error})
			continue
		}
		out.Results = append(out.Results, testResult{URL: addr, ErrorClass: "pending",
			Error: "no attempt logged yet: reload the page in a moment (is the deliverer running?)"})
	}
	return out
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
	PIIMasked  bool // the attempt's message is masked (docs/console.md#pii-access)
}

// attemptLog fills the Messages tab's raw delivery log (?view=attempts), newest first: as GET
// /v1/destinations/{id}/attempts.
func (u *ui) attemptLog(data *destinationData, id string, q url.Values, mask *piiMask) {
	if s := q.Get("status"); slices.Contains(statusFilters, s) {
		data.Status = s
	}
	var before uint64 = math.MaxUint64
	if c, err := strconv.ParseUint(q.Get("cursor"), 10, 64); err == nil {
		before, data.Cursor = c, q.Get("cursor")
	}
	log, next := u.s.attemptsPage(id, before, data.Status, logPage)
	data.PIIMasked = mask.masks()
	for _, a := range mask.attempts(log) {
		data.Log = append(data.Log, logRow{attempt: a, Clock: a.At.UTC().Format("15:04:05"), Day: a.At.UTC().Format("2006-01-02")})
	}
	data.NextCursor = next
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
	mask := u.s.maskOf(r)
	data := &attemptData{D: d, A: mask.attempts([]attempt{*a})[0], PIIMasked: mask.masks()}
	body := u.deliveredBody(d, a.MessageID)
	switch {
	case body != nil:
		shown := mask.json(body)
		data.Body, data.Pretty = string(shown), fmtPretty(shown)
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
