package schemas

import (
	"strconv"
	"strings"
)

// ConfigError is one problem in a config: where it is and what is wrong. Messages never
// include write keys, shared secrets or header values.
type ConfigError struct {
	// File is the config file's path when the config came from LoadConfigFile.
	File string
	// Line is the 1-based line in the YAML or JSON text, or 0 when unknown (a config built in
	// code, or a problem with the text as a whole).
	Line int
	// Path names the field: "destinations[1].settings.webhooks[0].url",
	// `…headers["X-Team"]`; "" for the document itself.
	Path string
	// Message says what is wrong, lower-case, without the location.
	Message string
}

// Error formats the error as "file:line: path: message", "line N: path: message" when there
// is no file, and leaves out the parts that are unknown.
func (e *ConfigError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(e.File + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ConfigErrors is every problem found in one config, in document order. ParseConfig,
// LoadConfigFile and the Validate methods return it (never empty) as their error; use
// errors.As to get the list, or errors.As with *ConfigError for the first entry.
type ConfigErrors []*ConfigError

// Error returns one line per problem.
func (es ConfigErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the entries, for errors.Is and errors.As.
func (es ConfigErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// errOrNil returns es as an error, or nil when it is empty (avoiding a non-nil interface
// holding a nil slice).
func (es ConfigErrors) errOrNil() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Field path helpers: paths look like `destinations[1].settings.webhooks[0].headers["X-A"]`.

func fieldPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func indexPath(prefix string, i int) string {
	return prefix + "[" + strconv.Itoa(i) + "]"
}

func keyPath(prefix, key string) string {
	return prefix + "[" + strconv.Quote(key) + "]"
}

// lineOf returns the line of path, or of its nearest ancestor that has one, or 0.
func lineOf(lines map[string]int, path string) int {
	if len(lines) == 0 {
		return 0
	}
	if l, ok := lines[path]; ok {
		return l
	}
	ends := segmentEnds(path)
	for i := len(ends) - 2; i >= 0; i-- {
		if l, ok := lines[path[:ends[i]]]; ok {
			return l
		}
	}
	return lines[""]
}

// segmentEnds returns the end offset of each segment of path: for `a.b[0]["x.y"]` the ends
// of "a", "a.b", "a.b[0]" and the whole path. Quoted map keys may hold '.', '[' or ']'.
func segmentEnds(path string) []int {
	var ends []int
	for i := 0; i < len(path); {
		switch path[i] {
		case '.':
			if i > 0 {
				ends = append(ends, i)
			}
			i++
		case '[':
			if i > 0 {
				ends = append(ends, i)
			}
			if i+1 < len(path) && path[i+1] == '"' {
				q, err := strconv.QuotedPrefix(path[i+1:])
				if err != nil {
					return append(ends, len(path))
				}
				i += 1 + len(q)
			} else {
				i++
			}
		default:
			i++
		}
	}
	return append(ends, len(path))
}
