package platform

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// How every Tributary command reads its settings (docs/configuration.md#run-time-settings):
//
//   - A settings struct tags each setting's field with `env:"NAME"` and `doc:"meaning"`; a
//     field without an env tag (a topic or group name that tests override) is not a setting.
//     A field holding another settings struct that is read on its own is tagged `env:"-"`.
//   - Its DefaultConfig (or DefaultXSettings) function holds every default; there are no
//     envDefault tags.
//   - FromEnv applies the environment on top of those defaults: an unset, empty or blank
//     variable keeps the default, anything else replaces it or is an error naming the
//     variable. Values are trimmed of surrounding white space, except those of fields tagged
//     `secret:"true"` (a password is taken as it is).
//   - A comma-separated list ([]string) drops blank entries and trims the others; other custom
//     types parse through an EnvParser given to FromEnv (ParseWith).
//   - Validate returns every problem, errors.Join'ed, each "NAME: what is wrong".
//   - LoadSettings does all three: the defaults, the environment on top (FromEnv), Validate.
//     Every command's settings (a service's ConfigFromEnv, CommandSettings, InitSettings) are
//     read through it.

// EnvParser parses the value of a variable into a field of one type that the env library
// cannot parse by itself; build it with ParseWith.
type EnvParser struct {
	typ   reflect.Type
	parse env.ParserFunc
}

// ParseWith makes parse the parser of every field of type T.
func ParseWith[T any](parse func(string) (T, error)) EnvParser {
	return EnvParser{typ: reflect.TypeFor[T](), parse: func(v string) (any, error) { return parse(v) }}
}

// ParseList splits a comma-separated list, trims every entry and drops the empty ones. It is
// how every []string setting is read (KAFKA_BROKERS, WEBHOOK_CA_FILES, …).
func ParseList(v string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out, nil
}

// FromEnv applies environ (variable name to value; nil: the process environment) to *cfg,
// which holds the defaults, following the rules above. It returns every variable that does
// not parse, each error naming its variable ("KAFKA_TLS: "maybe" is not a boolean"); *cfg
// keeps its defaults for those. It does not validate. It is safe to call concurrently on
// different structs.
func FromEnv[T any](cfg *T, environ map[string]string, parsers ...EnvParser) error {
	if environ == nil {
		environ = env.ToMap(os.Environ())
	}
	vars := envVariables(reflect.TypeFor[T]())
	prepared := make(map[string]string, len(vars))
	for name, v := range vars {
		value, ok := environ[name]
		if !ok || strings.TrimSpace(value) == "" {
			continue // unset or blank: the default stays
		}
		if !v.secret {
			value = strings.TrimSpace(value)
		}
		prepared[name] = value
	}
	funcs := map[reflect.Type]env.ParserFunc{
		reflect.TypeFor[[]string]():      func(v string) (any, error) { return ParseList(v) },
		reflect.TypeFor[time.Duration](): func(v string) (any, error) { return time.ParseDuration(v) },
	}
	for _, p := range parsers {
		funcs[p.typ] = p.parse
	}
	if err := env.ParseWithOptions(cfg, env.Options{Environment: prepared, FuncMap: funcs}); err != nil {
		return nameVariables(err, vars)
	}
	return nil
}

// Validator is a settings struct (through a pointer to it) that checks itself: Validate
// returns every unusable setting, each error naming its variable.
type Validator[T any] interface {
	*T
	Validate() error
}

// LoadSettings reads settings the one way every command does (the rules above): defaults (a
// DefaultConfig()), environ applied on top of them (FromEnv; nil: the process environment),
// then Validate. The error lists every variable that does not parse (such a setting keeps its
// valid default, so that Validate adds only the other problems) and every problem Validate
// finds, each naming its variable.
func LoadSettings[T any, PT Validator[T]](defaults T, environ map[string]string, parsers ...EnvParser) (T, error) {
	s := defaults
	err := FromEnv(&s, environ, parsers...)
	return s, errors.Join(err, PT(&s).Validate())
}

// envVariable is what FromEnv and the settings table know of one tagged field.
type envVariable struct {
	field  reflect.StructField
	secret bool
}

// envVariables returns the variables of t's fields tagged `env`, recursing into struct fields
// without a tag as the env library does.
func envVariables(t reflect.Type) map[string]envVariable {
	out := map[string]envVariable{}
	for _, f := range EnvFields(t) {
		out[f.Variable] = envVariable{field: f.Field, secret: f.Field.Tag.Get("secret") == "true"}
	}
	return out
}

// EnvField is one setting of a settings struct: the field and the variable that sets it.
type EnvField struct {
	// Variable is the environment variable (the env tag).
	Variable string
	// Index is the field's index path in the struct, for reflect.Value.FieldByIndex.
	Index []int
	// Field is the struct field; its doc tag says what the setting means.
	Field reflect.StructField
}

// EnvFields lists the settings of struct type t in field order: every field tagged
// `env:"NAME"`, recursing into untagged struct fields and skipping `env:"-"`. The settings
// table of docs/configuration.md is generated from it.
func EnvFields(t reflect.Type) []EnvField {
	var out []EnvField
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			idx := append(append([]int(nil), index...), i)
			name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
			switch {
			case name == "-":
			case name != "":
				out = append(out, EnvField{Variable: name, Index: idx, Field: f})
			case f.Type.Kind() == reflect.Struct:
				walk(f.Type, idx)
			}
		}
	}
	walk(t, nil)
	return out
}

// nameVariables rewrites the env library's parse errors, which name struct fields, to name the
// environment variable instead: `KAFKA_TLS: "maybe" is not a boolean (true or false)`. An
// error that already starts with its variable's name is kept as it is.
func nameVariables(err error, vars map[string]envVariable) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	byField := map[string]string{}
	for name, v := range vars {
		key := v.field.Name + "\x00" + v.field.Type.String()
		if _, dup := byField[key]; dup {
			byField[key] = "" // two variables for one field name and type: cannot tell
			continue
		}
		byField[key] = name
	}
	errs := make([]error, len(agg.Errors))
	for i, e := range agg.Errors {
		errs[i] = e
		var pe env.ParseError
		if !errors.As(e, &pe) {
			continue
		}
		name := byField[pe.Name+"\x00"+pe.Type.String()]
		if name == "" {
			continue
		}
		switch inner := pe.Err; {
		case strings.HasPrefix(inner.Error(), name+":"):
			errs[i] = inner
		default:
			errs[i] = fmt.Errorf("%s: %w", name, plainParseError(inner))
		}
	}
	return errors.Join(errs...)
}

// plainParseError says what a strconv error means without the function's name.
func plainParseError(err error) error {
	var ne *strconv.NumError
	if !errors.As(err, &ne) {
		return err
	}
	if errors.Is(ne.Err, strconv.ErrRange) {
		return fmt.Errorf("%q is out of range", ne.Num)
	}
	what := "a number"
	switch ne.Func {
	case "ParseBool":
		what = "a boolean (true or false)"
	case "ParseInt", "ParseUint":
		what = "an integer"
	}
	return fmt.Errorf("%q is not %s", ne.Num, what)
}
