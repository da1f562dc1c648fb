package schemas

import "encoding/json"

// decodeJSONValue decodes one JSON value (surrounding space allowed) into what the JSON Schema
// validator reads: map[string]any, []any, string, json.Number, bool or nil. It validates as
// strictly as the scanner of json_scan.go, and is about three times as fast as encoding/json
// into an any, which matters on the router's path (docs/routing.md#tracking-plans).
func decodeJSONValue(b []byte) (any, error) {
	i := skipSpace(b, 0)
	v, end, err := decodeAt(b, i, 0)
	if err != nil {
		return nil, err
	}
	if err := checkTrailing(b, end); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeAt decodes the value that starts at b[i] (no leading space) and returns the index past it.
func decodeAt(b []byte, i, depth int) (any, int, error) {
	if i >= len(b) {
		return nil, i, &syntaxError{"unexpected end of input", i}
	}
	switch c := b[i]; {
	case c == '"':
		end, esc, err := scanString(b, i)
		if err != nil {
			return nil, end, err
		}
		return unquote(b[i:end], esc), end, nil
	case c == '{':
		if depth >= maxDepth {
			return nil, i, &syntaxError{"nested too deeply", i}
		}
		m := make(map[string]any, 8)
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return m, i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return nil, i, &syntaxError{"expected a string key", i}
			}
			end, esc, err := scanString(b, i)
			if err != nil {
				return nil, end, err
			}
			key := unquote(b[i:end], esc)
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return nil, i, &syntaxError{"expected ':'", i}
			}
			var v any
			if v, i, err = decodeAt(b, skipSpace(b, i+1), depth+1); err != nil {
				return nil, i, err
			}
			m[key] = v
			i = skipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				return m, i + 1, nil
			}
			return nil, i, &syntaxError{"expected ',' or '}'", i}
		}
	case c == '[':
		if depth >= maxDepth {
			return nil, i, &syntaxError{"nested too deeply", i}
		}
		s := make([]any, 0, 4)
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return s, i + 1, nil
		}
		for {
			v, end, err := decodeAt(b, i, depth+1)
			if err != nil {
				return nil, end, err
			}
			s = append(s, v)
			i = skipSpace(b, end)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				return s, i + 1, nil
			}
			return nil, i, &syntaxError{"expected ',' or ']'", i}
		}
	case c == 't':
		end, err := skipLiteral(b, i, "true")
		return true, end, err
	case c == 'f':
		end, err := skipLiteral(b, i, "false")
		return false, end, err
	case c == 'n':
		end, err := skipLiteral(b, i, "null")
		return nil, end, err
	case c == '-' || (c >= '0' && c <= '9'):
		end, err := scanNumber(b, i)
		if err != nil {
			return nil, end, err
		}
		return jsonNumber(b[i:end]), end, nil
	}
	return nil, i, &syntaxError{"unexpected character", i}
}

func jsonNumber(b []byte) json.Number { return json.Number(b) }
