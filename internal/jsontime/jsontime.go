// Package jsontime reads and writes durations in JSON (and YAML read through
// JSON) as Go duration strings, the form configuration files use.
package jsontime

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a non-negative Go duration string: "500ms", "2s".
type Duration struct{ time.Duration }

// UnmarshalJSON reads a duration string; a number or a negative duration is
// an error that shows the expected form.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"500ms\" or \"2s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("want a duration such as \"500ms\" or \"2s\", got %q", s)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }
