package sim

import "testing"

// FuzzParseKVEventsConfig: any string is a config or an error, never a
// panic; an accepted config is valid and enabled only with a tcp endpoint.
func FuzzParseKVEventsConfig(f *testing.F) {
	f.Add(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","topic":"kv-events"}`)
	f.Add(`{"publisher":"null"}`)
	f.Add(`{"buffer_steps":0}`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseKVEventsConfig(s)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		if c.Enabled() && len(c.Endpoint) < len("tcp://") {
			t.Fatalf("enabled without an endpoint: %+v", c)
		}
	})
}
