package servicetest

import (
	"maps"
	"reflect"
	"strings"
	"testing"
)

// Settings is the settings test every service repeats, as a table of the service's own
// variables (docs/configuration.md#run-time-settings): read from no variable, the settings are
// the defaults; every variable is read; each bad value alone is an error naming its variable;
// several unusable settings at once are all reported. Run runs it.
type Settings[T any] struct {
	// FromEnviron reads the settings from an environment on top of their defaults and
	// validates them: a service's ConfigFromEnviron.
	FromEnviron func(environ map[string]string) (T, error)
	// Required is set in every case (unless the case sets the variable itself): the variables
	// without a usable default. Usually nil.
	Required map[string]string
	// Default is what FromEnviron returns from Required alone: DefaultConfig().
	Default T
	// Every sets every variable the settings read; Want changes a copy of Default into what
	// FromEnviron must return from it.
	Every map[string]string
	Want  func(*T)
	// Bad are values that alone (beside Required) must each be an error naming the variable.
	Bad []Bad
	// Unusable, if set, returns the error of several unusable settings at once (Validate of a
	// changed Default, or FromEnviron of several bad values); it must name each of
	// UnusableNamed.
	Unusable      func() error
	UnusableNamed []string
}

// Bad is one bad value of a variable.
type Bad struct {
	Variable, Value string
	// Says is what the error must contain; "" means Variable + ": ".
	Says string
}

// Run runs the cases of s as subtests of t and returns what FromEnviron read from Every, for
// the test's own checks of it.
func (s Settings[T]) Run(t *testing.T) (every T) {
	t.Helper()
	t.Run("no variable is the default", func(t *testing.T) {
		got, err := s.FromEnviron(s.environ(nil))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s.Default) {
			t.Errorf("got  %+v\nwant %+v", got, s.Default)
		}
	})
	t.Run("every variable", func(t *testing.T) {
		var err error
		every, err = s.FromEnviron(s.environ(s.Every))
		if err != nil {
			t.Fatal(err)
		}
		want := s.Default
		s.Want(&want)
		if !reflect.DeepEqual(every, want) {
			t.Errorf("got  %+v\nwant %+v", every, want)
		}
	})
	for _, b := range s.Bad {
		t.Run(b.Variable+"="+b.Value, func(t *testing.T) {
			says := b.Says
			if says == "" {
				says = b.Variable + ": "
			}
			_, err := s.FromEnviron(s.environ(map[string]string{b.Variable: b.Value}))
			if err == nil || !strings.Contains(err.Error(), says) {
				t.Errorf("error = %v, want one naming %s (%q)", err, b.Variable, says)
			}
		})
	}
	if s.Unusable != nil {
		t.Run("every problem", func(t *testing.T) {
			NamesEach(t, s.Unusable(), s.UnusableNamed...)
		})
	}
	return every
}

// environ returns Required with vars set over it.
func (s Settings[T]) environ(vars map[string]string) map[string]string {
	environ := maps.Clone(s.Required)
	if environ == nil {
		environ = map[string]string{} // never nil: nil reads the process environment
	}
	maps.Copy(environ, vars)
	return environ
}

// NamesEach fails t unless err names each of variables ("VARIABLE: ...").
func NamesEach(t testing.TB, err error, variables ...string) {
	t.Helper()
	for _, v := range variables {
		if err == nil || !strings.Contains(err.Error(), v+": ") {
			t.Errorf("error = %v, want every problem, %s among them", err, v)
		}
	}
}

// NamesEachOnce fails t unless err names each of variables ("VARIABLE: ...") exactly once.
func NamesEachOnce(t testing.TB, err error, variables ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("bad settings accepted")
	}
	for _, v := range variables {
		if n := strings.Count(err.Error(), v+": "); n != 1 {
			t.Errorf("%s named %d times in %q, want once", v, n, err)
		}
	}
}
