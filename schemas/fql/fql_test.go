package fql_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tributary-cdp/tributary/schemas/fql"
)

// segmentExample is the message of the examples in Segment's FQL reference.
const segmentExample = `{"event":"Button Clicked","type":"track","context":{"library":{"name":"analytics.js","version":"1.0"}},"properties":{"features":["discounts","dark-mode"]}}`

const order = `{"type":"track","event":"Order Completed","userId":"u-1","messageId":"m-1",
 "properties":{"total":129.99,"currency":"USD","coupon":null,"gift":true,"items":3,"product 1":{"price":"19.99"},"a.b":1,"tags":["x","y"]},
 "context":{"ip":"203.0.113.9","library":{"name":"analytics-go"}},"traits":{"plan":"Pro","email":"Ann@Example.com"},
 "esc":"caf\u00e9 \"q\"","emoji":"\ud83d\ude00"}`

func TestEval(t *testing.T) {
	for _, c := range []struct {
		expr, msg string
		want      bool
	}{
		// Segment's documented examples.
		{`event = 'Button Clicked'`, segmentExample, true},
		{`event = 'Screen Tapped'`, segmentExample, false},
		{`context.path.path = '/login'`, segmentExample, false},
		{`type = 'identify' or type = 'track'`, segmentExample, true},
		{`event = 'Button Clicked' and type = 'track'`, segmentExample, true},
		{`match( context.library.version, '1.*' )`, segmentExample, true},
		{`match( context.library.version, '2.*' )`, segmentExample, false},
		{`type = 'track' and ( event = 'Click' or match( event, 'Button *' ) )`, segmentExample, true},
		{`!contains( context.library.name, 'js' )`, segmentExample, false},
		{`'dark-mode' in properties.features`, segmentExample, true},
		{`'blink' in properties.features`, segmentExample, false},
		{`!( type in ['track', 'identify'] )`, segmentExample, false},
		{`length( userId ) > 0`, segmentExample, false},
		{`match('abcd', 'a*d')`, `{}`, true},
		{`match('', '*')`, `{}`, true},
		{`match('abc', 'ab')`, `{}`, false},
		{`match('abcd', 'a??d')`, `{}`, true},
		{`match('abcd', '*d')`, `{}`, true},
		{`match('ab*d', 'ab\\*d')`, `{}`, true},
		{`match('abxd', 'ab\\*d')`, `{}`, false},
		{`match('abCd', 'ab[cC]d')`, `{}`, true},
		{`match('abcd', 'ab[a-z]d')`, `{}`, true},
		{`match('abcd', 'ab[A-Z]d')`, `{}`, false},
		{`match('abcd', 'ab[!a-b]d')`, `{}`, true},
		{`match('a-b-c', '*-*-*')`, `{}`, true},
		// Typical filters.
		{`type = "track" and event = "Order Completed" and properties.total > 100`, order, true},
		{`type = "track" and event = "Order Completed" and properties.total > 200`, order, false},
		{`properties.total >= 129.99 and properties.total <= 129.99 and properties.total < 130`, order, true},
		{`properties.items = 3 and properties.items != 4`, order, true},
		{`traits.plan = 'Pro'`, order, true},
		{`match(traits.email, '*@Example.com')`, order, true},
		{`lowercase(traits.email) = 'ann@example.com'`, order, true},
		{`contains(lowercase(traits.email), 'example')`, order, true},
		{`properties.product\ 1.price = '19.99'`, order, true},
		{`properties.a\.b = 1`, order, true},
		{`properties.gift`, order, true},
		{`!properties.gift`, order, false},
		{`!properties.missing`, order, true},
		{`properties.tags = ['x', 'y']`, order, true},
		{`properties.tags = ['y', 'x']`, order, false},
		{`length(properties.tags) = 2 and length(event) = 15`, order, true},
		{`typeof(properties.total) = 'number' and typeof(event) = 'string' and typeof(properties.tags) = 'list'`, order, true},
		{`typeof(properties.gift) = 'bool' and typeof(properties.coupon) = 'null' and typeof(nope) = 'null'`, order, true},
		{`typeof(context) = 'object'`, order, true},
		{`esc = 'café "q"'`, order, true},
		{`length(esc) = 9`, order, true}, // bytes: é is 2,
		{`emoji = '😀'`, order, true},
		{`contains(esc, 'é "')`, order, true},
		{`match(esc, 'caf? *')`, order, true},
		// Precedence: ! > comparisons > and > or.
		{`true or false and false`, `{}`, true},
		{`(true or false) and false`, `{}`, false},
		{`false and false or true`, `{}`, true},
		{`!false and false`, `{}`, false},
		{`!(false and false)`, `{}`, true},
		{`!!true`, `{}`, true},
		{`!true = false`, `{}`, true},
		// null and missing fields.
		{`properties.coupon = null`, order, true},
		{`properties.nope = null`, order, true},
		{`properties.nope != null`, order, false},
		{`userId != null`, order, true},
		{`contains(properties.nope, 'x')`, order, false},
		{`length(properties.nope) = 0`, order, true},
		{`lowercase(properties.nope) = null`, order, true},
		{`match(properties.nope, '*')`, order, false},
		{`context.ip.v4 = 'x'`, order, false},
		// Type mismatches are false (!= true), never an error.
		{`properties.total = '129.99'`, order, false},
		{`properties.total != '129.99'`, order, true},
		{`event > 5`, order, false},
		{`event < 'z'`, order, false},
		{`properties.gift = 'true'`, order, false},
		{`contains(properties.total, '1')`, order, false},
		{`match(properties.total, '*')`, order, false},
		{`length(properties.total) = 0`, order, false},
		{`lowercase(properties.total) = 129.99`, order, false},
		{`'x' in event`, order, false},
		{`event`, order, false},
		{`properties.total and true`, order, false},
		{`!event`, order, false},
		// Duplicate keys: the last wins, as encoding/json decides.
		{`event = 'B' and properties.a = 2`, `{"event":"A","properties":{"a":1,"a":2},"event":"B"}`, true},
		// Malformed messages leave fields missing.
		{`event = 'A'`, `not json`, false},
		{`event = null`, `{"event":`, true},
		{`event = 'A'`, `[1,2]`, false},
	} {
		e, err := fql.Compile(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := e.Match([]byte(c.msg)); got != c.want {
			t.Errorf("%s on %.40s: got %v, want %v", c.expr, c.msg, got, c.want)
		}
	}
}

// TestManyMembers: a message with more top-level members than the index holds still finds
// the ones past it.
func TestManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{`)
	for i := range 40 {
		b.WriteString(`"k` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":1,`)
	}
	b.WriteString(`"event":"Late"}`)
	e, _ := fql.Compile(`event = 'Late' and kaa = 1`)
	if !e.Match([]byte(b.String())) {
		t.Fatal("member past the index not found")
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		expr string
		col  int
		msg  string
	}{
		{``, 1, "expected an expression"},
		{`event = `, 9, "expected a field, a value"},
		{`event = 'a`, 9, "unterminated string"},
		{`(event = 'a'`, 13, "expected ')' to close the '(' at column 1"},
		{`event = 'a' 'b'`, 13, "expected 'and', 'or' or the end"},
		{`event = 'a' and`, 16, "expected a field, a value"},
		{`nope(event)`, 1, `unknown function "nope"`},
		{`contains(event)`, 15, "contains takes 2 arguments, got 1"},
		{`match(event, 'a[b')`, 19, "match: the pattern has a '[' without"},
		{`event = 'é' # x`, 13, "unexpected character '#'"},
		{`properties. = 1`, 12, "expected a field name after '.'"},
		{`a = [1, b]`, 10, "expected a string, a number"},
		{`and = 1`, 1, `expected a field or a value, got "and"`},
		{`event = 1.2.3`, 9, "invalid number"},
		{strings.Repeat("(", 100) + "true" + strings.Repeat(")", 100), 65, "nested more than 64"},
	} {
		_, err := fql.Compile(c.expr)
		var fe *fql.Error
		if !errors.As(err, &fe) {
			t.Errorf("%q: error %v, want an *fql.Error", c.expr, err)
			continue
		}
		if fe.Column != c.col || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("%q: got column %d %q, want column %d %q", c.expr, fe.Column, fe.Msg, c.col, c.msg)
		}
	}
}

func TestPathSet(t *testing.T) {
	body := []byte(`{"version":1,"type":"track","properties":{"a":1,"b":{"c":2,"d":3},"e f":4},"context":{"ip":"1.2.3.4","library":{"name":"x"}},"traits":{"email":"e","plan":"p"}}`)
	for _, c := range []struct {
		paths []string
		keep  bool
		want  string
	}{
		{[]string{"context.ip", "traits.email", "properties.b.c", "properties.e\\ f", "nope.x"}, false,
			`{"version":1,"type":"track","properties":{"a":1,"b":{"d":3}},"context":{"library":{"name":"x"}},"traits":{"plan":"p"}}`},
		{[]string{"properties"}, false, `{"version":1,"type":"track","context":{"ip":"1.2.3.4","library":{"name":"x"}},"traits":{"email":"e","plan":"p"}}`},
		{[]string{"properties.a", "properties.b.d", "traits.plan"}, true,
			`{"version":1,"type":"track","properties":{"a":1,"b":{"d":3}},"context":{"ip":"1.2.3.4","library":{"name":"x"}},"traits":{"plan":"p"}}`},
		{[]string{"context.library"}, true,
			`{"version":1,"type":"track","properties":{"a":1,"b":{"c":2,"d":3},"e f":4},"context":{"library":{"name":"x"}},"traits":{"email":"e","plan":"p"}}`},
	} {
		ps, err := fql.NewPathSet(c.paths)
		if err != nil {
			t.Fatal(err)
		}
		var got, gotIndexed []byte
		var m fql.Message
		m.Reset(body)
		if c.keep {
			got, gotIndexed = ps.AppendKept(nil, body), ps.AppendKeptFrom(nil, &m)
		} else {
			got, gotIndexed = ps.AppendDropped(nil, body), ps.AppendDroppedFrom(nil, &m)
		}
		if string(got) != c.want || string(gotIndexed) != c.want {
			t.Errorf("%v keep=%v:\n got %s\n and %s (indexed)\nwant %s", c.paths, c.keep, got, gotIndexed, c.want)
		}
	}
	if _, err := fql.NewPathSet([]string{"a..b"}); err == nil {
		t.Error("a..b accepted")
	}
}

// TestEvalDoesNotAllocate: evaluating a compiled filter on a message allocates nothing.
func TestEvalDoesNotAllocate(t *testing.T) {
	exprs := []string{
		`type = "track" and event = "Order Completed" and properties.total > 100`,
		`match(traits.email, '*@Example.com') or contains(lowercase(context.library.name), 'go')`,
		`'x' in properties.tags and length(esc) > 2 and typeof(properties.gift) = 'bool'`,
	}
	msg := []byte(order)
	for _, s := range exprs {
		e, err := fql.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		var m fql.Message
		if n := testing.AllocsPerRun(100, func() { m.Reset(msg); e.Eval(&m) }); n != 0 {
			t.Errorf("%s: %v allocs per evaluation", s, n)
		}
	}
}

func BenchmarkEval(b *testing.B) {
	e, err := fql.Compile(`type = "track" and event = "Order Completed" and properties.total > 100`)
	if err != nil {
		b.Fatal(err)
	}
	msg := []byte(order)
	var m fql.Message
	b.ReportAllocs()
	for b.Loop() {
		m.Reset(msg)
		if !e.Eval(&m) {
			b.Fatal("no match")
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`type = "track" and event = "Order Completed" and properties.total > 100`, order)
	f.Add(`!( type in ['track', 'identify'] ) or match(context.library.version, '1.[0-9]*')`, segmentExample)
	f.Add(`length(lowercase(properties.product\ 1.price)) >= -1.5e3`, order)
	f.Fuzz(func(t *testing.T, expr, msg string) {
		e, err := fql.Compile(expr)
		if err != nil {
			var fe *fql.Error
			if !errors.As(err, &fe) || fe.Column < 1 {
				t.Fatalf("%q: error %v", expr, err)
			}
			return
		}
		e.Match([]byte(msg))
		if ps, err := fql.NewPathSet([]string{expr}); err == nil {
			ps.AppendDropped(nil, []byte(msg))
			ps.AppendKept(nil, []byte(msg))
			var m fql.Message
			m.Reset([]byte(msg))
			ps.AppendDroppedFrom(nil, &m)
			ps.AppendKeptFrom(nil, &m)
		}
	})
}

// BenchmarkEvalFilters evaluates the conditions of a destination's 10 typical filters on one
// routed track message, sharing one Message as the router does.
func BenchmarkEvalFilters(b *testing.B) {
	var es []*fql.Expr
	for _, s := range []string{
		`type = 'page'`, `match(userId, 'test-*')`, `contains(lowercase(context.userAgent), 'bot')`,
		`event = 'Order Completed' and properties.total < 10`, `match(event, 'Debug *') or event = 'Heartbeat'`,
		`context.library.name = 'analytics-go' and context.library.version = '2.0.0'`,
		`event = 'Order Completed' and typeof(properties.currency) = 'null'`, `type = 'identify'`, `event = 'Signed Up'`,
	} {
		e, err := fql.Compile(s)
		if err != nil {
			b.Fatal(err)
		}
		es = append(es, e)
	}
	msg := []byte(`{"type":"track","event":"Order Completed","userId":"user-12345","anonymousId":"a-9f8e7d","messageId":"0b3f6c1e-5b7e-4a8e-9f0c-2f1d3e4c5b6a","properties":{"orderId":"o-1","total":129.99,"currency":"USD","products":[{"sku":"s-1","price":64.99,"quantity":2}]},"context":{"ip":"203.0.113.9","library":{"name":"analytics-go","version":"3.3.0"},"userAgent":"Mozilla/5.0"},"integrations":{"All":true},"timestamp":"2026-01-01T00:00:00.000Z","sentAt":"2026-01-01T00:00:00.100Z","receivedAt":"2026-01-01T00:00:00.200Z"}`)
	var m fql.Message
	b.ReportAllocs()
	for b.Loop() {
		m.Reset(msg)
		for _, e := range es {
			e.Eval(&m)
		}
	}
}
