package schemas

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("720h", "90s") in config files
// and config records.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(ShortDuration(time.Duration(d)))
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"720h\"")
	}
	return d.UnmarshalText([]byte(s))
}

// String is the duration as a config file writes it ("72h").
func (d Duration) String() string { return ShortDuration(time.Duration(d)) }

// MarshalText writes the duration as a string (used by YAML encoders).
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(ShortDuration(time.Duration(d))), nil
}

// UnmarshalText reads a duration string such as "720h" or "15m". A leading whole number of
// days is allowed too: "90d" is 2160h, "1d12h" is 36h.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q: use a number with a unit such as \"720h\"", string(b))
	}
	*d = Duration(v)
	return nil
}

// parseDuration is time.ParseDuration with a leading number of days ("30d", "1d12h").
func parseDuration(s string) (time.Duration, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i == len(s) || s[i] != 'd' || i > 6 {
		return time.ParseDuration(s)
	}
	days, _ := strconv.Atoi(s[:i])
	v := time.Duration(days) * 24 * time.Hour
	if rest := s[i+1:]; rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || r < 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		v += r
	}
	return v, nil
}
