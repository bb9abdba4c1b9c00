// Package clock reads the clock that a component's optional Now field names:
// tests set the field, production leaves it nil for the wall clock.
package clock

import "time"

// Now returns now(), or the wall-clock time when now is nil.
func Now(now func() time.Time) time.Time {
	if now != nil {
		return now()
	}
	return time.Now()
}
