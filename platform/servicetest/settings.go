package servicetest

import (
	"maps"
	"reflect"
	"slices"
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
	// Bad lists, by variable, values that each alone (beside Required) must be an error
	// naming the variable ("VARIABLE: ...").
	Bad map[string][]string
	// Unusable, if set, makes several settings of a copy of Default unusable at once; Validate
	// of it must name each of UnusableNamed.
	Unusable      func(*T)
	Validate      func(*T) error
	UnusableNamed []string
}

// Run runs the cases of s as subtests of t. It returns what FromEnviron read from Every and
// the error of Validate after Unusable, for the test's own checks of them.
func (s Settings[T]) Run(t *testing.T) (every T, unusable error) {
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
	for _, variable := range slices.Sorted(maps.Keys(s.Bad)) {
		for _, value := range s.Bad[variable] {
			t.Run(variable+"="+value, func(t *testing.T) {
				_, err := s.FromEnviron(s.environ(map[string]string{variable: value}))
				if err == nil || !strings.Contains(err.Error(), variable+": ") {
					t.Errorf("error = %v, want one naming %s", err, variable)
				}
			})
		}
	}
	if s.Unusable != nil {
		t.Run("every problem", func(t *testing.T) {
			c := s.Default
			s.Unusable(&c)
			unusable = s.Validate(&c)
			NamesEach(t, unusable, s.UnusableNamed...)
		})
	}
	return every, unusable
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
