package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	// go.yaml.in/yaml/v3 is the maintained continuation of gopkg.in/yaml.v3 (same API, kept by
	// the YAML organisation). We chose it over goccy/go-yaml because its yaml.Node tree carries
	// the line of every key and value, which is all strict decoding needs, and its parser has
	// years of fuzzing behind it. We walk the node tree ourselves instead of using
	// Decoder.KnownFields: that gives every error a field path as well as a line, catches
	// duplicate keys, keeps the lines for Validate, and lets JSON share the same walk.
	"go.yaml.in/yaml/v3"
)

// Config formats accepted by ParseConfig.
const (
	ConfigFormatYAML = "yaml"
	ConfigFormatJSON = "json"
)

// Limits that keep a hostile config from costing unbounded time or memory.
const (
	// maxConfigValues bounds the values one parse visits, YAML aliases expanded.
	maxConfigValues = 200_000
	// maxJSONDepth bounds JSON nesting; the config model itself is 7 levels deep.
	maxJSONDepth = 64
)

// ParseConfig parses a tenant config (docs/configuration.md) strictly: format is "yaml" or "json"; the
// text must hold exactly one document whose top level is a mapping (object); every key must be
// a field of the model, spelled exactly (case-sensitive), and appear once; every value must
// have the field's type. It returns every problem found, as ConfigErrors, each naming the
// field path and the line.
//
// ParseConfig does not check the rules of Validate; the returned Config remembers the line of
// each field so that Validate's errors carry lines too. Numbers in a trait condition's equals
// become float64.
func ParseConfig(data []byte, format string) (*Config, error) {
	var cfg Config
	lines, err := decodeStrict(data, format, &cfg)
	if err != nil {
		return nil, err
	}
	cfg.lines = lines
	return &cfg, nil
}

// LoadConfigFile reads, parses and validates a config file; the format follows the extension
// (.yaml, .yml or .json). Its ConfigErrors carry the file's path.
func LoadConfigFile(path string) (*Config, error) {
	var format string
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		format = ConfigFormatYAML
	case ".json":
		format = ConfigFormatJSON
	default:
		return nil, fmt.Errorf("loading config %s: unknown extension %q: want .yaml, .yml or .json", path, filepath.Ext(path))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading config: %w", err)
	}
	cfg, err := ParseConfig(data, format)
	if err == nil {
		err = cfg.Validate()
	}
	var errs ConfigErrors
	if errors.As(err, &errs) {
		for _, e := range errs {
			e.File = path
		}
		return nil, errs
	}
	if err != nil {
		return nil, fmt.Errorf("loading config %s: %w", path, err)
	}
	return cfg, nil
}

// decodeStrict parses data as one YAML or JSON document into out (a pointer to a struct of
// the config model) and returns the line of every field path it set.
func decodeStrict(data []byte, format string, out any) (map[string]int, error) {
	var (
		root *yaml.Node
		err  error
	)
	switch format {
	case ConfigFormatYAML:
		root, err = yamlRoot(data)
	case ConfigFormatJSON:
		root, err = jsonRoot(data)
	default:
		return nil, fmt.Errorf("unknown config format %q: want %q or %q", format, ConfigFormatYAML, ConfigFormatJSON)
	}
	if err != nil {
		return nil, err
	}
	d := &decoder{json: format == ConfigFormatJSON, lines: map[string]int{}, budget: maxConfigValues}
	v := reflect.ValueOf(out).Elem()
	if root.Kind != yaml.MappingNode {
		d.fail(root, "", "the document must be a mapping of fields, got %s", describe(root))
	} else {
		d.decode(root, "", v)
	}
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	return d.lines, nil
}

// yamlSyntaxError matches the errors of the YAML parser: "yaml: line 3: did not find ...".
var yamlSyntaxError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a YAML parser error into a ConfigErrors with the line.
func yamlError(err error) error {
	msg := err.Error()
	if m := yamlSyntaxError.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return ConfigErrors{{Line: line, Message: "invalid YAML: " + m[2]}}
	}
	return ConfigErrors{{Message: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}}
}

// yamlRoot parses the single YAML document of data and returns its top node.
func yamlRoot(data []byte) (root *yaml.Node, err error) {
	defer func() {
		// The parser must never take the process down on hostile input.
		if r := recover(); r != nil {
			root, err = nil, ConfigErrors{{Message: fmt.Sprintf("invalid YAML: parser failure: %v", r)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ConfigErrors{{Message: "the config is empty: want a mapping with sources, destinations and audiences"}}
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, ConfigErrors{{Line: extra.Line, Message: "a second YAML document: a config file holds exactly one"}}
	case !errors.Is(err, io.EOF):
		return nil, yamlError(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, ConfigErrors{{Line: doc.Line, Message: "the config is empty: want a mapping with sources, destinations and audiences"}}
	}
	return doc.Content[0], nil
}

// jsonRoot parses data as exactly one JSON value and returns it as a yaml.Node tree (with
// lines), so that JSON and YAML share one strict decoder.
func jsonRoot(data []byte) (*yaml.Node, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a byte order mark, as some editors write
	r := &jsonReader{data: data, dec: json.NewDecoder(bytes.NewReader(data)), line: 1}
	r.dec.UseNumber()
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ConfigErrors{{Message: "the config is empty: want an object with sources, destinations and audiences"}}
	}
	root, err := r.value(0)
	if err != nil {
		return nil, err
	}
	if _, err := r.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, ConfigErrors{{Line: r.lineAt(r.dec.InputOffset()), Message: "unexpected content after the JSON object"}}
	}
	return root, nil
}

type jsonReader struct {
	data []byte
	dec  *json.Decoder
	// line is the line at offset off; offsets only grow, so lines are counted once.
	off  int
	line int
}

func (r *jsonReader) lineAt(off int64) int {
	end := min(int(off), len(r.data))
	for ; r.off < end; r.off++ {
		if r.data[r.off] == '\n' {
			r.line++
		}
	}
	return r.line
}

func (r *jsonReader) syntaxError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return ConfigErrors{{Line: r.lineAt(se.Offset), Message: "invalid JSON: " + se.Error()}}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ConfigErrors{{Line: r.lineAt(int64(len(r.data))), Message: "invalid JSON: unexpected end of input"}}
	default:
		return ConfigErrors{{Line: r.lineAt(r.dec.InputOffset()), Message: "invalid JSON: " + err.Error()}}
	}
}

// value reads one JSON value. A token ends on the line it starts (JSON strings hold no raw
// newlines), so the line at the offset after it is its line.
func (r *jsonReader) value(depth int) (*yaml.Node, error) {
	tok, err := r.dec.Token()
	if err != nil {
		return nil, r.syntaxError(err)
	}
	line := r.lineAt(r.dec.InputOffset())
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxJSONDepth {
			return nil, ConfigErrors{{Line: line, Message: fmt.Sprintf("invalid JSON: nested more than %d levels deep", maxJSONDepth)}}
		}
		n := &yaml.Node{Line: line}
		switch t {
		case '{':
			n.Kind, n.Tag = yaml.MappingNode, "!!map"
		case '[':
			n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		default:
			return nil, ConfigErrors{{Line: line, Message: fmt.Sprintf("invalid JSON: unexpected %q", t)}}
		}
		for r.dec.More() {
			if n.Kind == yaml.MappingNode {
				ktok, err := r.dec.Token()
				if err != nil {
					return nil, r.syntaxError(err)
				}
				key, ok := ktok.(string)
				if !ok {
					return nil, ConfigErrors{{Line: r.lineAt(r.dec.InputOffset()), Message: "invalid JSON: object key is not a string"}}
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Line: r.lineAt(r.dec.InputOffset())})
			}
			child, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, child)
		}
		if _, err := r.dec.Token(); err != nil { // the closing delimiter
			return nil, r.syntaxError(err)
		}
		return n, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t, Style: yaml.DoubleQuotedStyle, Line: line}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(t), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t), Line: line}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t), Line: line}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}, nil
	default:
		return nil, ConfigErrors{{Line: line, Message: fmt.Sprintf("invalid JSON: unexpected token %v", tok)}}
	}
}

// decoder fills Go values of the config model from a yaml.Node tree, strictly.
type decoder struct {
	// json is set for JSON input, where only JSON strings decode into string fields (YAML
	// lets plain scalars such as 123 or true be strings).
	json   bool
	lines  map[string]int
	errs   ConfigErrors
	budget int
	fields map[reflect.Type][]structField
}

type structField struct {
	name  string // the key in YAML and JSON
	index []int  // for reflect.Value.FieldByIndex: embedded structs' fields are flattened
}

var durationType = reflect.TypeFor[Duration]()

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &ConfigError{Line: n.Line, Path: path, Message: fmt.Sprintf(format, args...)})
}

// describe names what a node is, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		default:
			return "a value tagged " + n.ShortTag()
		}
	default:
		return "an unsupported value"
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// decode fills v (settable) from n; path names v for errors and lines.
func (d *decoder) decode(n *yaml.Node, path string, v reflect.Value) {
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.fail(n, path, "the config has more than %d values (aliases expanded)", maxConfigValues)
		}
		return
	}
	if n.Kind == yaml.AliasNode {
		line := n.Line
		if n = n.Alias; n == nil {
			return
		}
		// Errors inside the anchored value point at it; the path itself is where it is used.
		d.lines[path] = line
	} else {
		d.lines[path] = n.Line
	}

	if v.Type() == durationType {
		d.duration(n, path, v)
		return
	}
	if v.Type() == identityLimitsType {
		d.identityLimits(n, path, v)
		return
	}
	if v.Type() == rawJSONType { // a JSON Schema of a tracking plan
		d.rawJSON(n, path, v)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if isNull(n) {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		d.decode(n, path, p.Elem())
		v.Set(p)
	case reflect.Struct:
		d.structValue(n, path, v)
	case reflect.Slice:
		d.slice(n, path, v)
	case reflect.Map:
		d.stringMap(n, path, v)
	case reflect.String:
		if s, ok := d.str(n, path); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.fail(n, path, "want true or false, got %s", describeValue(n))
			return
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			d.fail(n, path, "want true or false, got %q", n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Int:
		var i int
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
			d.fail(n, path, "want an integer, got %s", describeValue(n))
			return
		}
		v.SetInt(int64(i))
	case reflect.Float64:
		f, ok := number(n)
		if !ok {
			d.fail(n, path, "want a number, got %s", describeValue(n))
			return
		}
		v.SetFloat(f)
	case reflect.Interface:
		d.scalarAny(n, path, v)
	default:
		// The model has no other kinds; reaching here is a bug in the model, not the input.
		d.fail(n, path, "unsupported field type %s", v.Type())
	}
}

// describeValue is describe plus the literal for scalars: `a string "abc"`.
func describeValue(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		return describe(n) + " " + strconv.Quote(n.Value)
	}
	return describe(n)
}

// number decodes an integer or floating-point scalar.
func number(n *yaml.Node) (float64, bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false
	}
	if t := n.ShortTag(); t != "!!int" && t != "!!float" {
		return 0, false
	}
	var f float64
	if err := n.Decode(&f); err != nil {
		return 0, false
	}
	return f, true
}

// str decodes a string scalar; null is "".
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "want a string, got %s", describeValue(n))
		return "", false
	}
	switch tag := n.ShortTag(); {
	case tag == "!!null":
		return "", true
	case tag == "!!str":
	case !d.json && (tag == "!!int" || tag == "!!float" || tag == "!!bool" || tag == "!!timestamp"):
		// A plain YAML scalar such as 123 or 2024-01-01 is taken as written.
	default:
		d.fail(n, path, "want a string, got %s", describeValue(n))
		return "", false
	}
	if !utf8.ValidString(n.Value) {
		d.fail(n, path, "want valid UTF-8 text")
		return "", false
	}
	return n.Value, true
}

func (d *decoder) duration(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.fail(n, path, "want a duration string such as \"720h\", got %s", describeValue(n))
		return
	}
	var dur Duration
	if err := dur.UnmarshalText([]byte(n.Value)); err != nil {
		d.fail(n, path, "%s", err.Error())
		return
	}
	v.Set(reflect.ValueOf(dur))
}

// scalarAny decodes a trait condition's value: a string, a number (as float64), a boolean,
// or null.
func (d *decoder) scalarAny(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "want a string, number or boolean, got %s", describe(n))
		return
	}
	switch n.ShortTag() {
	case "!!null":
		v.SetZero()
	case "!!str":
		if s, ok := d.str(n, path); ok {
			v.Set(reflect.ValueOf(s))
		}
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			d.fail(n, path, "want true or false, got %q", n.Value)
			return
		}
		v.Set(reflect.ValueOf(b))
	case "!!int", "!!float":
		f, ok := number(n)
		if !ok {
			d.fail(n, path, "want a number, got %s", describeValue(n))
			return
		}
		v.Set(reflect.ValueOf(f))
	default:
		d.fail(n, path, "want a string, number or boolean, got %s", describe(n))
	}
}

func (d *decoder) slice(n *yaml.Node, path string, v reflect.Value) {
	if isNull(n) {
		v.SetZero()
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list, got %s", describe(n))
		return
	}
	if len(n.Content) == 0 {
		v.SetZero() // empty and absent lists are the same: nil
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, indexPath(path, i), s.Index(i))
	}
	v.Set(s)
}

// mapKey returns the text of a mapping key, which must be a scalar.
func (d *decoder) mapKey(k *yaml.Node, path string) (string, bool) {
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode || (d.json && k.ShortTag() != "!!str") {
		d.fail(k, path, "keys must be strings, got %s", describe(k))
		return "", false
	}
	if !utf8.ValidString(k.Value) {
		d.fail(k, path, "keys must be valid UTF-8 text")
		return "", false
	}
	return k.Value, true
}

// stringMap decodes a map[string]string (webhook headers).
func (d *decoder) stringMap(n *yaml.Node, path string, v reflect.Value) {
	if isNull(n) {
		v.SetZero()
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", describe(n))
		return
	}
	if len(n.Content) == 0 {
		v.SetZero()
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	d.eachKey(n, path, func(key, kp string, value *yaml.Node) {
		val := reflect.New(v.Type().Elem()).Elem()
		d.decode(value, kp, val)
		m.SetMapIndex(reflect.ValueOf(key), val)
	})
	v.Set(m)
}

// eachKey calls f with each key of the mapping n, its path and its value node, in order; a
// key that is not a string or is repeated is an error, and f is not called for it.
func (d *decoder) eachKey(n *yaml.Node, path string, f func(key, kp string, value *yaml.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, ok := d.mapKey(n.Content[i], path)
		if !ok {
			continue
		}
		kp := keyPath(path, key)
		if first, dup := seen[key]; dup {
			d.fail(n.Content[i], kp, "repeated key (first at line %d)", first)
			continue
		}
		seen[key] = n.Content[i].Line
		d.lines[kp] = n.Content[i].Line
		f(key, kp, n.Content[i+1])
	}
}

// structFields lists the decodable fields of t by their JSON names.
func (d *decoder) structFields(t reflect.Type) []structField {
	if fs, ok := d.fields[t]; ok {
		return fs
	}
	var fs []structField
	var add func(t reflect.Type, index []int)
	add = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
				add(f.Type, append(slices.Clone(index), i)) // flattened, as encoding/json does
				continue
			}
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			fs = append(fs, structField{name: name, index: append(slices.Clone(index), i)})
		}
	}
	add(t, nil)
	if d.fields == nil {
		d.fields = map[reflect.Type][]structField{}
	}
	d.fields[t] = fs
	return fs
}

func (d *decoder) structValue(n *yaml.Node, path string, v reflect.Value) {
	if isNull(n) {
		v.SetZero()
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", describe(n))
		return
	}
	fields := d.structFields(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, ok := d.mapKey(n.Content[i], path)
		if !ok {
			continue
		}
		var field *structField
		for j := range fields {
			if fields[j].name == key {
				field = &fields[j]
				break
			}
		}
		if field == nil {
			d.fail(n.Content[i], path, "unknown field %q%s", key, suggestField(key, fields))
			continue
		}
		fp := fieldPath(path, key)
		if first, dup := seen[key]; dup {
			d.fail(n.Content[i], fp, "repeated field (first at line %d)", first)
			continue
		}
		seen[key] = n.Content[i].Line
		d.decode(n.Content[i+1], fp, v.FieldByIndex(field.index))
		// The key's line reads better than the value's for a block value.
		d.lines[fp] = n.Content[i].Line
	}
}

// suggestField returns ` (did you mean "writeKey"?)` when key differs from a field only in
// case, '_', '-' or a plural 's', and "" otherwise.
func suggestField(key string, fields []structField) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, f := range fields {
		if n, k := norm(f.name), norm(key); n == k || n == k+"s" || n+"s" == k {
			return fmt.Sprintf(" (did you mean %q?)", f.name)
		}
	}
	return ""
}

// finite reports whether f is neither NaN nor infinite.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
