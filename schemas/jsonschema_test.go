package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The JSON Schemas under jsonschema/ are the published contract for teams that produce straight
// to Kafka (docs/topics.md). These tests hold them to the Go code: whatever the inbound schema
// accepts, the tracking.inbound front door accepts, and the other way round; whatever ingest
// writes to tracking.events matches the event schema.

const (
	inboundSchemaFile = "inbound-message.schema.json"
	eventSchemaFile   = "tracking-event.schema.json"
)

func compileSchema(t testing.TB, name string) *jsonschema.Schema {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("jsonschema", name))
	if err != nil {
		t.Fatalf("compiling %s: %v", name, err)
	}
	return sch
}

// schemaVerdict validates raw against sch; a value that is not JSON is refused.
func schemaVerdict(sch *jsonschema.Schema, raw []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(inst)
}

// frontDoorVerdict is what ingest decides for one tracking.inbound record value (ingest's
// prepare): the 32 KB limit, DecodeMessage, then Validate. Nil means accepted.
func frontDoorVerdict(raw []byte) error {
	if len(raw) > MaxMessageBytes {
		return fmt.Errorf("message is %d bytes, more than the %d-byte limit", len(raw), MaxMessageBytes)
	}
	m, err := DecodeMessage(raw)
	if err != nil {
		return err
	}
	return m.Validate()
}

// outsideSchema reports the inputs whose verdict depends on a rule JSON Schema cannot state:
// the byte size, the nesting depth, and the length of a numeric messageId. docs/topics.md
// lists them.
func outsideSchema(raw []byte) bool {
	if len(raw) > MaxMessageBytes {
		return true
	}
	if _, err := DecodeMessage(raw); err != nil && strings.Contains(err.Error(), "nested too deeply") {
		return true
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) == nil {
		if id := bytes.TrimSpace(top["messageId"]); len(id) > MaxMessageIDLength && id[0] != '"' {
			return true
		}
	}
	return false
}

func checkAgreement(t *testing.T, sch *jsonschema.Schema, raw []byte) (accepted bool) {
	t.Helper()
	goErr, schemaErr := frontDoorVerdict(raw), schemaVerdict(sch, raw)
	if (goErr == nil) != (schemaErr == nil) {
		t.Errorf("disagreement on %s\n  front door: %v\n  schema:     %v", raw, goErr, schemaErr)
	}
	return goErr == nil
}

func TestInboundSchemaAgreesWithValidator(t *testing.T) {
	sch := compileSchema(t, inboundSchemaFile)
	long := strings.Repeat("m", 101)
	cases := []struct {
		name  string
		raw   string
		valid bool
	}{
		{"track", `{"type":"track","event":"E","userId":"u"}`, true},
		{"track anonymous", `{"type":"track","event":"E","anonymousId":"a"}`, true},
		{"track numeric ids", `{"type":"track","event":"E","userId":12345678901234567890123,"messageId":-1.5e3}`, true},
		{"track null userId, anonymousId", `{"type":"track","event":"E","userId":null,"anonymousId":"a"}`, true},
		{"track empty userId, anonymousId", `{"type":"track","event":"E","userId":"","anonymousId":"a"}`, true},
		{"track with everything", `{"type":"track","event":"Order Completed","userId":"u","anonymousId":"a","messageId":"m-1","timestamp":"2026-01-26T09:47:00.573Z","sentAt":"2026-01-26T09:47:00.580+0000","originalTimestamp":null,"receivedAt":"","properties":{"total":1e400},"context":{"ip":"8.8.8.8"},"integrations":{"All":false,"Webhooks":true},"traits":null,"writeKey":"wk","_metadata":{"bundled":["Segment.io"]},"channel":"server"}`, true},
		{"identify", `{"type":"identify","userId":"u","traits":{"email":"a@example.com"}}`, true},
		{"page anonymous", `{"type":"page","anonymousId":"a","name":"Pricing","category":null}`, true},
		{"screen", `{"type":"screen","userId":"u","name":"Home"}`, true},
		{"group", `{"type":"group","groupId":"g","anonymousId":"a"}`, true},
		{"group numeric groupId", `{"type":"group","groupId":0,"userId":"u"}`, true},
		{"alias", `{"type":"alias","userId":"u","previousId":"p"}`, true},
		{"messageId with inner spaces", `{"type":"track","event":"E","userId":"u","messageId":"order 1 – é"}`, true},
		{"messageId of one character", `{"type":"track","event":"E","userId":"u","messageId":"x"}`, true},
		{"messageId of 100 characters", `{"type":"track","event":"E","userId":"u","messageId":"` + long[:100] + `"}`, true},
		{"messageId of 100 non-ASCII characters", `{"type":"track","event":"E","userId":"u","messageId":"` + strings.Repeat("é", 100) + `"}`, true},
		{"messageId of 100 escaped characters", `{"type":"track","event":"E","userId":"u","messageId":"` + strings.Repeat(`\u00e9`, 100) + `"}`, true},
		{"duplicate key: last wins", `{"type":"track","event":"E","userId":"u","event":null}`, false},
		{"duplicate key: last wins, valid", `{"type":"track","event":null,"userId":"u","event":"E"}`, true},

		{"no type", `{"userId":"u"}`, false},
		{"null type", `{"type":null,"userId":"u"}`, false},
		{"empty type", `{"type":"","userId":"u"}`, false},
		{"type delete", `{"type":"delete","userId":"u"}`, false},
		{"type in capitals", `{"type":"Track","userId":"u","event":"E"}`, false},
		{"type not a string", `{"type":7}`, false},
		{"identify without ids", `{"type":"identify"}`, false},
		{"page with null ids", `{"type":"page","userId":null,"anonymousId":null}`, false},
		{"page with empty ids", `{"type":"page","userId":"","anonymousId":""}`, false},
		{"screen without ids", `{"type":"screen"}`, false},
		{"track without event", `{"type":"track","userId":"u"}`, false},
		{"track with null event", `{"type":"track","userId":"u","event":null}`, false},
		{"track with empty event", `{"type":"track","userId":"u","event":""}`, false},
		{"track with numeric event", `{"type":"track","userId":"u","event":5}`, false},
		{"track with nothing", `{"type":"track"}`, false},
		{"group without groupId", `{"type":"group","userId":"u"}`, false},
		{"group with empty groupId", `{"type":"group","userId":"u","groupId":""}`, false},
		{"alias without previousId", `{"type":"alias","userId":"u"}`, false},
		{"alias with anonymousId only", `{"type":"alias","previousId":"p","anonymousId":"a"}`, false},
		{"alias with nothing", `{"type":"alias"}`, false},
		{"messageId of 101 characters", `{"type":"track","event":"E","userId":"u","messageId":"` + long + `"}`, false},
		{"messageId an object", `{"type":"track","event":"E","userId":"u","messageId":{}}`, false},
		{"messageId with a bell", `{"type":"track","event":"E","userId":"u","messageId":"p1\u0007"}`, false},
		{"messageId with CR LF", `{"type":"track","event":"E","userId":"u","messageId":"x\r\nX-Injected: 1"}`, false},
		{"messageId with a tab", `{"type":"track","event":"E","userId":"u","messageId":"a\tb"}`, false},
		{"messageId with DEL", `{"type":"track","event":"E","userId":"u","messageId":"m\u007f"}`, false},
		{"messageId ending with a space", `{"type":"track","event":"E","userId":"u","messageId":"dd-1 "}`, false},
		{"messageId starting with a space", `{"type":"track","event":"E","userId":"u","messageId":" dd-1"}`, false},
		{"messageId of one space", `{"type":"track","event":"E","userId":"u","messageId":" "}`, false},
		{"userId true", `{"type":"track","event":"E","userId":true}`, false},
		{"anonymousId an array", `{"type":"track","event":"E","userId":"u","anonymousId":["a"]}`, false},
		{"event an array", `{"type":"track","userId":"u","event":["x"]}`, false},
		{"name a number", `{"type":"page","userId":"u","name":1}`, false},
		{"category an object", `{"type":"page","userId":"u","category":{}}`, false},
		{"writeKey a number", `{"type":"page","userId":"u","writeKey":1}`, false},
		{"properties an array", `{"type":"track","userId":"u","event":"E","properties":[1]}`, false},
		{"context a string", `{"type":"track","userId":"u","event":"E","context":"x"}`, false},
		{"integrations true", `{"type":"track","userId":"u","event":"E","integrations":true}`, false},
		{"traits a number", `{"type":"identify","userId":"u","traits":1}`, false},
		{"timestamp a word", `{"type":"track","userId":"u","event":"E","timestamp":"yesterday"}`, false},
		{"sentAt a number", `{"type":"track","userId":"u","event":"E","sentAt":5}`, false},
		{"not JSON", `{"type":"track",}`, false},
		{"truncated", `{"type":"track"`, false},
		{"trailing data", `{"type":"track","userId":"u","event":"E"} x`, false},
		{"leading zero", `{"type":"track","userId":"u","event":"E","properties":{"a":01}}`, false},
		{"NaN", `{"type":"track","userId":"u","event":"E","properties":{"a":NaN}}`, false},
		{"an array", `[{"type":"track","userId":"u","event":"E"}]`, false},
		{"a string", `"track"`, false},
		{"empty", ``, false},
		{"empty object", `{}`, false},
		{"a batch", `{"batch":[{"type":"track","userId":"u","event":"E"}]}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := []byte(c.raw)
			if got := frontDoorVerdict(raw) == nil; got != c.valid {
				t.Fatalf("front door accepts %s: %v, want %v (%v)", raw, got, c.valid, frontDoorVerdict(raw))
			}
			checkAgreement(t, sch, raw)
		})
	}
}

// timestampCases are client timestamps and whether ParseTimestamp takes them.
var timestampCases = []struct {
	ts    string
	valid bool
}{
	{"2026-01-02T15:04:05Z", true},
	{"2026-01-02T15:04:05.123Z", true},
	{"2026-01-02T15:04:05.123456789Z", true},
	{"2026-01-02T15:04:05,123Z", true},
	{"2026-01-02T15:04:05,1234567890Z", true}, // time.Parse takes any number of digits after a comma
	{"2026-01-02T15:04:05+01:00", true},
	{"2026-01-02T15:04:05.5+0100", true},
	{"2026-01-02T15:04:05,5+0100", true},
	{"2026-01-02T15:04:05.123456789+0100", true},
	{"2026-01-02T15:04:05-00:00", true},
	{"2026-01-02T15:04:05-0000", true},
	{"2026-01-02T15:04:05-01:30", true},
	{"2026-01-02T15:04:05+24:00", true},
	{"2026-01-02T15:04:05+2460", true},
	{"2026-01-02T15:04:05+00:60", true},
	{"2024-02-29T00:00:00Z", true},
	{"2000-02-29T00:00:00Z", true},
	{"0000-02-29T00:00:00Z", true},
	{"2024-02-29T00:00:00-0100", true},
	{"2026-06-30T00:00:00-0100", true},
	{"2026-12-31T23:59:59.999999999Z", true},
	{"0001-01-01T00:00:00Z", true},
	{"9999-12-31T23:59:59Z", true},

	{"2026-01-02t15:04:05Z", false},
	{"2026-01-02T15:04:05z", false},
	{"2026-01-02 15:04:05Z", false},
	{"2026-01-02T15:04:05.Z", false},
	{"2026-01-02T15:04:05,Z", false},
	{"2026-01-02T15:04:05.1234567890Z", false},
	{"2026-01-02T15:04:05.1234567890+0100", false},
	{"2026-01-02T15:04:05+01", false},
	{"2026-01-02T15:04:05+2500", false},
	{"2026-01-02T15:04:05+25:00", false},
	{"2026-01-02T15:04:05+0061", false},
	{"2026-01-02T15:04:05+00:61", false},
	{"2026-01-02T15:04:05+99:99", false},
	{"2026-01-02T15:04:05+1:00", false},
	{"2026-01-02T15:04:05+01:0", false},
	{"2026-01-02T15:04:05+00:00:00", false},
	{"2026-01-02T15:04:05Z0100", false},
	{"2026-02-29T00:00:00Z", false},
	{"1900-02-29T00:00:00Z", false},
	{"2026-04-31T00:00:00Z", false},
	{"2026-06-31T00:00:00-0100", false},
	{"2026-13-01T00:00:00Z", false},
	{"2026-00-01T00:00:00Z", false},
	{"2026-01-00T00:00:00Z", false},
	{"2026-01-32T00:00:00Z", false},
	{"2026-01-02T24:00:00Z", false},
	{"2026-01-02T23:60:00Z", false},
	{"2026-01-02T23:59:60Z", false},
	{"2026-1-02T15:04:05Z", false},
	{"+2026-01-02T15:04:05Z", false},
	{"12026-01-02T15:04:05Z", false},
	{"2026-01-02T15:04:05", false},
	{"2026-01-02", false},
	{"2026-01-02T15:04+01:00", false},
	{"2026-01-02T15:04:05 +0100", false},
	{"2026-01-02T15:04:05+0100\n", false},
	{" 2026-01-02T15:04:05Z", false},
	{"٢٠٢٦-01-02T15:04:05Z", false},
}

func TestInboundSchemaTimestamps(t *testing.T) {
	sch := compileSchema(t, inboundSchemaFile)
	for _, c := range timestampCases {
		if _, err := ParseTimestamp(c.ts); (err == nil) != c.valid {
			t.Errorf("ParseTimestamp(%q) = %v, want valid=%v", c.ts, err, c.valid)
		}
		for _, field := range []string{"timestamp", "originalTimestamp", "sentAt", "receivedAt"} {
			raw, _ := json.Marshal(map[string]string{"type": "track", "userId": "u", "event": "E", field: c.ts})
			if got := checkAgreement(t, sch, raw); got != c.valid {
				t.Errorf("%s %q: accepted %v, want %v", field, c.ts, got, c.valid)
			}
		}
	}
}

// TestInboundSchemaExamples: the messages of testdata/messages and the schema's own examples are
// accepted by both.
func TestInboundSchemaExamples(t *testing.T) {
	sch := compileSchema(t, inboundSchemaFile)
	files, err := filepath.Glob("testdata/messages/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata messages: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !checkAgreement(t, sch, raw) {
			t.Errorf("%s: rejected", f)
		}
	}
	doc, err := os.ReadFile(filepath.Join("jsonschema", inboundSchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Examples []json.RawMessage }
	if err := json.Unmarshal(doc, &s); err != nil || len(s.Examples) == 0 {
		t.Fatalf("schema examples: %v", err)
	}
	for _, ex := range s.Examples {
		if !checkAgreement(t, sch, ex) {
			t.Errorf("schema example %s: rejected", ex)
		}
	}
}

// TestInboundSchemaRandomMessages compares the two over many messages built at random from
// values that sit on each rule's edges.
func TestInboundSchemaRandomMessages(t *testing.T) {
	sch := compileSchema(t, inboundSchemaFile)
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	var accepted int
	for range n {
		raw := randomMessage(rng)
		if outsideSchema(raw) {
			continue
		}
		if checkAgreement(t, sch, raw) {
			accepted++
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d messages: %d accepted, %d rejected", n, accepted, n-accepted)
	if accepted < n/10 || accepted > n*9/10 {
		t.Errorf("the generator is lopsided: %d of %d accepted", accepted, n)
	}
}

// randomValues are, per kind of field, values every rule takes (good) and values some rule
// refuses or that count as absent (edge).
var randomValues = map[string]struct{ good, edge []string }{
	"type":       {[]string{`"track"`, `"identify"`, `"page"`, `"screen"`, `"group"`, `"alias"`}, []string{`"delete"`, `"Track"`, `""`, `null`, `7`}},
	"id":         {[]string{`"u"`, `"5f0a4b2c"`, `0`, `-1.5e3`, `"\u00e9"`}, []string{`""`, `null`, `true`, `{}`, `["u"]`}},
	"text":       {[]string{`"E"`, `"Order Completed"`}, []string{`""`, `null`, `5`, `false`}},
	"messageId":  {[]string{`"m-1"`, `123`, `"` + strings.Repeat("x", 100) + `"`, `"` + strings.Repeat(`\u00e9`, 100) + `"`, `""`, `null`}, []string{`"` + strings.Repeat("x", 101) + `"`, `{}`, `"p1\u0007"`, `"dd-1 "`, `"a\r\nb"`}},
	"object":     {[]string{`{}`, `{"a":1}`, `{"ip":"8.8.8.8","library":{"name":"x"}}`, `null`}, []string{`[]`, `"x"`, `1`}},
	"extraValue": {[]string{`{"bundled":["Segment.io"]}`, `"server"`, `null`, `[1,2]`}, nil},
	"extraKey":   {[]string{`_metadata`, `channel`, `version`, `type2`}, nil},
}

func randomMessage(rng *rand.Rand) []byte {
	pick := func(kind string) string {
		vs := randomValues[kind]
		if len(vs.edge) > 0 && rng.IntN(100) < 8 {
			return vs.edge[rng.IntN(len(vs.edge))]
		}
		return vs.good[rng.IntN(len(vs.good))]
	}
	ts := func() string {
		switch rng.IntN(10) {
		case 0:
			return `null`
		case 1:
			return `""`
		case 2:
			return `1700000000`
		}
		return strconv.Quote(timestampCases[rng.IntN(len(timestampCases))].ts)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	add := func(key, value string) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(key) + ":" + value)
	}
	if rng.IntN(20) > 0 {
		add("type", pick("type"))
	}
	maybe := func(p int, key, kind string) {
		if rng.IntN(100) < p {
			add(key, pick(kind))
		}
	}
	maybe(70, "userId", "id")
	maybe(50, "anonymousId", "id")
	maybe(60, "event", "text")
	maybe(30, "groupId", "id")
	maybe(30, "previousId", "id")
	maybe(15, "name", "text")
	maybe(10, "category", "text")
	maybe(5, "writeKey", "text")
	maybe(30, "messageId", "messageId")
	for _, f := range []string{"timestamp", "originalTimestamp", "sentAt", "receivedAt"} {
		if rng.IntN(100) < 12 {
			add(f, ts())
		}
	}
	for _, f := range []string{"context", "integrations", "traits", "properties"} {
		maybe(15, f, "object")
	}
	if rng.IntN(100) < 20 {
		add(pick("extraKey"), pick("extraValue"))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// FuzzInboundSchema: for any input, the schema and the front door agree, except on the rules
// JSON Schema cannot state (outsideSchema). go test -fuzz FuzzInboundSchema explores further.
func FuzzInboundSchema(f *testing.F) {
	files, _ := filepath.Glob("testdata/messages/*.json")
	corpus, _ := filepath.Glob("testdata/fuzz/FuzzDecodeMessage/*")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	for _, file := range corpus {
		if data, err := readFuzzCorpusBytes(file); err == nil {
			f.Add(data)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		f.Add(randomMessage(rng))
	}
	sch := compileSchema(f, inboundSchemaFile)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if outsideSchema(raw) {
			t.Skip("outside what JSON Schema can state")
		}
		checkAgreement(t, sch, raw)
	})
}

// readFuzzCorpusBytes reads the []byte value of a one-argument "go test fuzz v1" file.
func readFuzzCorpusBytes(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	lines := strings.SplitN(strings.TrimSpace(string(data)), "\n", 3)
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
		return nil, fmt.Errorf("%s: not a one-argument []byte corpus file", file)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	return []byte(s), err
}

// TestEventSchema: every message the front door accepts, enriched as ingest enriches it and
// encoded by AppendJSON (the value of tracking.events), matches the event schema.
func TestEventSchema(t *testing.T) {
	events := compileSchema(t, eventSchemaFile)
	rng := rand.New(rand.NewPCG(5, 6))
	receivedAt := time.Date(2026, 1, 26, 9, 47, 1, 234567891, time.UTC)
	var checked int
	for i := range 20000 {
		raw := randomMessage(rng)
		if outsideSchema(raw) || frontDoorVerdict(raw) != nil {
			continue
		}
		m, _ := DecodeMessage(raw)
		// The enrichment of ingest (ingest/process.go enrich).
		if m.MessageID == "" {
			m.MessageID = "7d0e9a5c-3b1f-4d2a-9c8e-2f1a0b3c4d5e"
		}
		m.ReceivedAt = receivedAt
		switch ts := m.Timestamp; {
		case ts.IsZero():
			m.Timestamp = receivedAt
		case !m.SentAt.IsZero():
			m.OriginalTimestamp, m.Timestamp = ts, receivedAt.Add(-m.SentAt.Sub(ts))
		default:
			m.OriginalTimestamp = ts
		}
		if i%2 == 0 {
			if err := m.SetContextIPIfAbsent("203.0.113.7"); err != nil {
				t.Fatal(err)
			}
		}
		out := m.AppendJSON(nil)
		if err := schemaVerdict(events, out); err != nil {
			t.Fatalf("tracking.events value %s (from %s) does not match %s: %v", out, raw, eventSchemaFile, err)
		}
		checked++
	}
	if checked < 1000 {
		t.Fatalf("only %d accepted messages checked", checked)
	}
	for _, bad := range []string{
		`{"type":"track","messageId":"m","userId":"u","event":"E","timestamp":"2026-01-26T09:47:00Z","receivedAt":"2026-01-26T09:47:00.000Z"}`,
		`{"type":"track","messageId":"m","userId":"u","event":"E","timestamp":"2026-01-26T09:47:00.000Z","receivedAt":"2026-01-26T09:47:00.000Z","writeKey":"wk"}`,
		`{"type":"track","messageId":"m","userId":"u","timestamp":"2026-01-26T09:47:00.000Z","receivedAt":"2026-01-26T09:47:00.000Z"}`,
		`{"type":"track","userId":"u","event":"E","timestamp":"2026-01-26T09:47:00.000Z","receivedAt":"2026-01-26T09:47:00.000Z"}`,
	} {
		if schemaVerdict(events, []byte(bad)) == nil {
			t.Errorf("the event schema accepts %s", bad)
		}
	}
}
