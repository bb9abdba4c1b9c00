package render

import (
	"fmt"
	"strconv"
	"time"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// maxDurationPart is the largest number one part of a Gateway API duration
// may hold: GEP-2257 allows 1 to 4 parts of at most 5 digits each.
const maxDurationPart = 99999

// GatewayDuration writes d in the Gateway API's duration format (GEP-2257,
// `^([0-9]{1,5}(h|m|s|ms)){1,4}$`), which Envoy Gateway's CRDs use too:
// 1500ms is `1s500ms`, 90m is `1h30m`, zero is `0s`. Go's own format (`1.5s`,
// `1h30m0s`) has fractions the schema rejects. The format has no unit below a
// millisecond, so a duration with a sub-millisecond part is refused rather than
// rounded: the CRDs refuse such values with a message first, and a silently
// changed timeout would differ from what the object says. Negative durations
// and more than 99999 hours cannot be written either.
func GatewayDuration(d time.Duration) (gwapiv1.Duration, error) {
	switch {
	case d < 0:
		return "", fmt.Errorf("duration %s is negative; Gateway API durations cannot be", d)
	case d%time.Millisecond != 0:
		return "", fmt.Errorf("duration %s has a part below a millisecond, which the Gateway API's format cannot hold: use whole milliseconds", d)
	case d == 0:
		return "0s", nil
	}
	hours := d / time.Hour
	if hours > maxDurationPart {
		return "", fmt.Errorf("duration %s exceeds the Gateway API's largest, %dh59m59s999ms", d, maxDurationPart)
	}
	out := make([]byte, 0, 24)
	rest := d
	for _, unit := range []struct {
		size time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if n := rest / unit.size; n > 0 {
			out = strconv.AppendInt(out, int64(n), 10)
			out = append(out, unit.name...)
			rest -= n * unit.size
		}
	}
	return gwapiv1.Duration(out), nil
}

// mustGatewayDuration is GatewayDuration of a constant known to fit.
func mustGatewayDuration(d time.Duration) gwapiv1.Duration {
	out, err := GatewayDuration(d)
	if err != nil {
		panic(err)
	}
	return out
}
