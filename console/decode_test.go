package console

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// The views' lean decoders (console/decode.go) against json.Unmarshal, the path they replace:
// the same view contents for every record, malformed ones included.

// attemptCase is one webhooks.attempts value; byJSON says the lean path leaves it to
// json.Unmarshal (errUnsure), so that the table proves the lean path itself on the others.
type attemptCase struct {
	name, value string
	byJSON      bool
}

var attemptCases = []attemptCase{
	{"normal", `{"destinationId":"hooks","messageId":"m-1","url":"https://hooks.example.com/in?token=xxxxx","attempt":1,"status":200,"latencyMs":12.5,"errorClass":"ok","concurrencyLimit":16,"at":"2026-11-27T03:00:00.123Z"}`, false},
	{"failure", `{"destinationId":"hooks","messageId":"m-2","url":"https://hooks.example.com/in","attempt":3,"status":503,"latencyMs":80,"errorClass":"status_5xx","error":"status_5xx: HTTP 503 from hooks.example.com","concurrencyLimit":4,"pausedForMs":2000,"at":"2026-11-27T03:00:01Z"}`, false},
	{"what the message is, the answer", `{"destinationId":"hooks","messageId":"m-4","url":"https://hooks.example.com/in","attempt":1,"status":500,"latencyMs":3,"errorClass":"status_5xx","error":"x","concurrencyLimit":4,"at":"2026-11-27T03:00:01Z","type":"track","event":"Order \"Completed\"","userId":"user-5","anonymousId":"a-1","receivedAt":"2026-11-27T03:00:00.5Z","nextAttemptAt":"2026-11-27T03:00:11Z","responseHeaders":{"Content-Type":"text/plain","X-Id":"r\u00e9"},"responseBody":"boom \ud83d\ude00"}`, false},
	{"dead-lettered, answer members null or empty", `{"destinationId":"hooks","messageId":"m-5","attempt":2,"errorClass":"status_4xx","deadLettered":"status_4xx","responseHeaders":{},"responseBody":null,"receivedAt":"not a time"}`, false},
	{"answer headers null, repeated", `{"destinationId":"hooks","responseHeaders":null,"responseHeaders":{"A":"1"},"responseHeaders":{"B":"2","A":null}}`, false},
	{"answer headers not an object", `{"destinationId":"hooks","responseHeaders":["A"]}`, false},
	{"answer header not a string", `{"destinationId":"hooks","responseHeaders":{"A":1}}`, false},
	{"test delivery", `{"destinationId":"hooks","messageId":"m-3","url":"https://hooks.example.com/in","attempt":1,"status":204,"latencyMs":0.25,"errorClass":"ok","test":true,"at":"2026-11-27T03:00:02Z"}`, false},
	{"escaped quotes", `{"destinationId":"hooks","messageId":"a\"b\\c","url":"https://hooks.example.com/in","errorClass":"timeout","error":"timeout: Post \"https://hooks.example.com/in\": context deadline exceeded","at":"2026-11-27T03:00:03Z"}`, false},
	{"unicode escapes", `{"destinationId":"caf\u00e9","messageId":"\u00e9t\u00E9 \ud83d\ude00","url":"https://hooks.example.com/a?b=1\u0026c=2","errorClass":"other","error":"\u0000\t\n","at":"2026-11-27T03:00:04Z"}`, false},
	{"raw unicode", `{"destinationId":"café","messageId":"été 😀","url":"https://hooks.example.com/é","errorClass":"ok","at":"2026-11-27T03:00:05Z"}`, false},
	{"lone surrogates", `{"destinationId":"d","messageId":"\ud800x\udc00\ud800\u0041","errorClass":"ok"}`, false},
	{"invalid UTF-8", "{\"destinationId\":\"d\xff\",\"messageId\":\"m\xc3\",\"error\":\"\xed\xa0\x80\"}", false},
	{"credentials in the URL", `{"destinationId":"hooks","url":"https://user:pass@hooks.example.com/in?token=secret#frag","errorClass":"ok"}`, false},
	{"unparsable URL", `{"destinationId":"hooks","url":"https://user@hooks example.com/%zz","errorClass":"ok"}`, false},
	{"no at", `{"destinationId":"hooks","messageId":"m-4","errorClass":"ok"}`, false},
	{"at with an offset", `{"destinationId":"hooks","at":"2026-11-27T04:00:00.5+01:00"}`, false},
	{"at not a time", `{"destinationId":"hooks","at":"yesterday"}`, false},
	{"only a destination", `{"destinationId":"d"}`, false},
	{"no destination", `{"messageId":"m-5","status":200}`, false},
	{"empty destination", `{"destinationId":"","messageId":"m-6"}`, false},
	{"nulls", `{"destinationId":"d","messageId":null,"url":null,"attempt":null,"status":null,"latencyMs":null,"errorClass":null,"error":null,"at":null,"test":null}`, false},
	{"null after a value", `{"destinationId":"d","messageId":"m-7","messageId":null,"status":500,"status":null}`, false},
	{"repeated keys", `{"destinationId":"a","destinationId":"b","attempt":1,"attempt":2,"test":true,"test":false}`, false},
	{"keys in another case", `{"DestinationID":"d","MESSAGEID":"m-8","Url":"https://hooks.example.com/x","ATTEMPT":2,"errorclass":"tls","AT":"2026-11-27T03:00:06Z"}`, false},
	{"exact key after a folded one", `{"DESTINATIONID":"a","destinationId":"b"}`, false},
	{"escaped keys", `{"destination\u0049d":"d","message\u0069d":"m-9"}`, false},
	{"unknown members", `{"x":{"y":[1,2,{"z":null}]},"destinationId":"d","n":-1.5e3,"t":true,"s":"str","a":[]}`, false},
	{"numbers", `{"destinationId":"d","attempt":-0,"status":0,"latencyMs":-0.0001e-2}`, false},
	{"filtered by a destination filter", `{"destinationId":"hooks","messageId":"m-10","errorClass":"filtered","reason":"destination_filter","filter":"small \"orders\"","at":"2026-11-27T03:00:07Z"}`, false},
	{"filter null", `{"destinationId":"hooks","errorClass":"filtered","reason":"destination_filter","filter":null}`, false},
	{"filter a number", `{"destinationId":"hooks","errorClass":"filtered","filter":1}`, false},
	{"space", " \n{ \"destinationId\" : \"d\" , \"attempt\" :\t7 }\r\n", false},
	{"non-ASCII key folding to a field", `{"destinationId":"d","meſſageId":"kelvin"}`, true},
	{"non-ASCII unknown key", `{"destinationId":"d","prénom":"x"}`, true},
	{"nested deeper than the scanner reads", `{"destinationId":"d","x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, true},
	// wrong types: json.Unmarshal fails, the record is skipped
	{"attempt a string", `{"destinationId":"d","attempt":"3"}`, false},
	{"status a fraction", `{"destinationId":"d","status":1.5}`, false},
	{"attempt an exponent", `{"destinationId":"d","attempt":1e2}`, false},
	{"attempt too large", `{"destinationId":"d","attempt":99999999999999999999}`, false},
	{"latency a string", `{"destinationId":"d","latencyMs":"5"}`, false},
	{"latency out of range", `{"destinationId":"d","latencyMs":1e400}`, false},
	{"test a string", `{"destinationId":"d","test":"true"}`, false},
	{"destination a number", `{"destinationId":5}`, false},
	{"error an object", `{"destinationId":"d","error":{}}`, false},
	{"message id an array", `{"destinationId":"d","messageId":["m"]}`, false},
	{"url a bool", `{"destinationId":"d","url":false}`, false},
	{"wrong type then invalid", `{"destinationId":"d","attempt":"1",`, false},
	{"concurrency limit a string", `{"destinationId":"d","concurrencyLimit":"16"}`, false},
	{"paused a fraction", `{"destinationId":"d","pausedForMs":1.5}`, false},
	{"concurrency limit and pause null", `{"destinationId":"d","concurrencyLimit":null,"pausedForMs":null}`, false},
	// malformed: skipped
	{"empty", ``, true},
	{"null", `null`, true},
	{"an array", `[{"destinationId":"d"}]`, true},
	{"a string", `"d"`, true},
	{"truncated", `{"destinationId":"d","messageId":"m`, true},
	{"trailing data", `{"destinationId":"d"}x`, true},
	{"trailing comma", `{"destinationId":"d",}`, true},
	{"control character", "{\"destinationId\":\"d\x01\"}", true},
	{"bad escape", `{"destinationId":"\x"}`, true},
	{"single quotes", `{'destinationId':'d'}`, true},
	{"leading zero", `{"destinationId":"d","attempt":01}`, true},
}

// The delivery log holds the same attempts, the same counters, and skips the same records,
// read by the lean decoder as by json.Unmarshal.
func TestAttemptDecoderMatchesUnmarshal(t *testing.T) {
	ts := time.Date(2026, 11, 27, 3, 0, 0, 0, time.FixedZone("x", 3600))
	lean, old := views.NewAttempts(10, time.Hour), views.NewAttempts(10, time.Hour)
	dec := newAttemptDecoder()
	var leanSkipped, oldSkipped int
	for _, c := range append(attemptCases, attemptCases...) { // twice: the second time from the caches
		r := &kgo.Record{Topic: schemas.TopicAttempts, Value: []byte(c.value), Timestamp: ts}
		var f attemptFields
		if err := decodeAttemptFields(r.Value, &f); errors.Is(err, errUnsure) != c.byJSON {
			t.Errorf("%s: decodeAttemptFields: %v, want by encoding/json %v", c.name, err, c.byJSON)
		}
		got, gotOK := dec.attempt(r)
		want, wantOK := attemptOf(r)
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n lean %v %+v\n json %v %+v", c.name, gotOK, got, wantOK, want)
		}
		if gotOK {
			lean.Add([]attempt{got}, nil)
		} else {
			leanSkipped++
		}
		if wantOK {
			old.Add([]attempt{want}, nil)
		} else {
			oldSkipped++
		}
	}
	if leanSkipped != oldSkipped || leanSkipped == 0 {
		t.Errorf("skipped %d records, json.Unmarshal %d", leanSkipped, oldSkipped)
	}
	if !reflect.DeepEqual(lean, old) { // every destination's ring and counters
		t.Error("the delivery logs differ")
	}
}

// rejectedCases are tracking.rejected values: the message as sent, anything at all.
var rejectedCases = []string{
	`{"type":"track","messageId":"m-1","event":"Signed Up"}`,
	`{"type":"tr\"ack","messageId":"caf\u00e9 \ud83d\ude00","writeKey":"x"}`,
	`{"type":"identify","messageId":"m-2","type":"page","messageId":"m-3"}`,
	`{"type":null,"messageId":null}`,
	`{"type":"","messageId":""}`,
	`{"type":1,"messageId":{"a":"b"}}`,
	`{"type":["track"],"messageId":true}`,
	`{"Type":"track","MessageId":"m-4"}`,
	`{"type":"track","messageId":"\ud800"}`,
	"{\"type\":\"tr\xffack\",\"messageId\":\"m\"}",
	`{"typ\u0065":"screen","messageId":"m-5"}`,
	`{"event":"no type"}`,
	`{"type":"track","messageId":"m-6",}`,
	`{"type":"track"`,
	`[{"type":"track"}]`,
	`null`,
	` null`,
	`"track"`,
	`not JSON at all`,
	``,
}

// oldRejectedFields is how the debugger read a rejected message's type and message id before
// the lean decoder: schemas.ParseMembers and json.Unmarshal of each value.
func oldRejectedFields(raw []byte, typ, messageID string) (string, string) {
	if ms, err := schemas.ParseMembers(raw); err == nil {
		for key, dst := range map[string]*string{"type": &typ, "messageId": &messageID} {
			if v, ok := ms.Get(key); ok && *dst == "" {
				var str string
				if json.Unmarshal(v, &str) == nil {
					*dst = str
				}
			}
		}
	}
	return typ, messageID
}

// The debugger shows the same type and message id of a rejected message as with
// json.Unmarshal, for messages with and without headers of their own.
func TestRejectedEventFieldsMatchUnmarshal(t *testing.T) {
	l := views.NewEvents(2 * len(rejectedCases))
	headers := [][]kgo.RecordHeader{nil, {{Key: schemas.HeaderType, Value: []byte("alias")}}}
	for _, h := range headers {
		for _, raw := range rejectedCases {
			r := &kgo.Record{Topic: schemas.TopicRejected, Value: []byte(raw), Headers: h, Timestamp: time.Now()}
			l.Add([]views.Record{{Source: "web", R: r, Rejected: true}}, nil)
			e := l.Recent("web", 1)[0]
			var htyp string
			if h != nil {
				htyp = "alias"
			}
			typ, id := oldRejectedFields([]byte(raw), htyp, "")
			if e.Type != typ || e.MessageID != id {
				t.Errorf("%q: type %q, message id %q; json.Unmarshal: %q, %q", raw, e.Type, e.MessageID, typ, id)
			}
		}
	}
}

// replayCases are webhooks.dlq.replayed values.
var replayCases = []string{
	`{"destinationId":"hooks","messageId":"m-1","replayedAt":"2026-11-27T03:00:00Z","partition":0,"offset":12}`,
	`{"destinationId":"ho\"oks","messageId":"\u00e9\ud83d\ude00","replayedAt":null}`,
	`{"DestinationId":"hooks","MESSAGEID":"m-2"}`,
	`{"destinationId":"hooks","destinationId":null}`,
	`{"destinationId":"","messageId":"m-3"}`,
	`{"messageId":"m-4"}`,
	`{"destinationId":1}`,
	`{"destinationId":"hooks","replayedAt":7}`,
	`{"replayedAt":"2026-11-27T03:00:00.000Z","destinationId":"hooks","messageId":"m-6","url":"https://xxxxx@other.example.com/in","supersededBy":"0:12"}`,
	`{"destinationId":"hooks","url":5}`,
	`{"destinationId":"hooks","SupersededBy":["0:1"]}`,
	`{"destinationId":"hooks","meſſageId":"m-5"}`,
	"{\"destinationId\":\"h\xff\"}",
	`{"destinationId":"hooks"`,
	`[]`,
	`null`,
	``,
}

// oldReplayMark is how the DLQ view read a replay mark before the lean decoder: json.Unmarshal
// into schemas.ReplayMark.
func oldReplayMark(b []byte) (schemas.ReplayMark, bool) {
	var m schemas.ReplayMark
	return m, len(b) > 0 && json.Unmarshal(b, &m) == nil
}

// The DLQ view reads the same replay marks, and skips the same records, as with json.Unmarshal.
func TestReplayMarkMatchesUnmarshal(t *testing.T) {
	for _, raw := range replayCases {
		got, gotOK := replayMarkOf([]byte(raw))
		want, wantOK := oldReplayMark([]byte(raw))
		if gotOK != wantOK || (wantOK && got != want) {
			t.Errorf("%q: %v %+v; json.Unmarshal: %v %+v", raw, gotOK, got, wantOK, want)
		}
	}
}

// FuzzViewDecoders: for any record, each view's lean decoder reads what json.Unmarshal reads.
func FuzzViewDecoders(f *testing.F) {
	for _, c := range attemptCases {
		f.Add([]byte(c.value))
	}
	for _, s := range append(rejectedCases, replayCases...) {
		f.Add([]byte(s))
	}
	ts := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &kgo.Record{Value: b, Timestamp: ts}
		got, gotOK := newAttemptDecoder().attempt(r)
		want, wantOK := attemptOf(r)
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("attempt %q:\n lean %v %+v\n json %v %+v", b, gotOK, got, wantOK, want)
		}
		typ, id := jsonTextString(views.RejectedFields(b))
		if wtyp, wid := oldRejectedFields(b, "", ""); typ != wtyp || id != wid {
			t.Errorf("rejected %q: %q %q; json.Unmarshal: %q %q", b, typ, id, wtyp, wid)
		}
		m, ok := replayMarkOf(b)
		if wm, wok := oldReplayMark(b); ok != wok || (wok && m != wm) {
			t.Errorf("replay mark %q: %v %+v; json.Unmarshal: %v %+v", b, ok, m, wok, wm)
		}
	})
}

func jsonTextString(a, b []byte) (string, string) { return string(a), string(b) }

// jsonNames are the JSON names of a struct type's fields, in their order.
func jsonNames(typ reflect.Type) []string {
	var out []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

// TestViewDecodersReadSchemasTypes: the lean decoders know every member of the records they
// read, by the names of the schemas types (so that they refuse what schemas' decoders refuse).
func TestViewDecodersReadSchemasTypes(t *testing.T) {
	if want := jsonNames(reflect.TypeFor[schemas.AttemptRecord]()); !slices.Equal(attemptNames, want) {
		t.Errorf("attemptNames = %v, want schemas.AttemptRecord's %v", attemptNames, want)
	}
	if want := jsonNames(reflect.TypeFor[schemas.ReplayMark]()); !slices.Equal(replayMarkNames, want) {
		t.Errorf("replayMarkNames = %v, want schemas.ReplayMark's %v", replayMarkNames, want)
	}
}
