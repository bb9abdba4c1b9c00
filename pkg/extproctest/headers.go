package extproctest

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Header is one HTTP header entry. Keys are lowercase, as in Envoy's header map.
type Header struct {
	Key   string
	Value string
}

// Headers is an ordered header map that may hold a key more than once, like Envoy's.
type Headers []Header

// NewHeaders builds Headers from alternating keys and values; keys are lowercased.
// It panics on an odd number of arguments, which is a bug in the calling test.
func NewHeaders(kv ...string) Headers {
	if len(kv)%2 != 0 {
		panic("extproctest.NewHeaders: odd number of arguments")
	}
	h := make(Headers, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		h = append(h, Header{Key: strings.ToLower(kv[i]), Value: kv[i+1]})
	}
	return h
}

// Get returns the first value of key, or "" when it is absent.
func (h Headers) Get(key string) string {
	v, _ := h.Lookup(key)
	return v
}

// Lookup returns the first value of key and whether the key is present.
func (h Headers) Lookup(key string) (string, bool) {
	key = strings.ToLower(key)
	for _, e := range h {
		if e.Key == key {
			return e.Value, true
		}
	}
	return "", false
}

// Values returns every value of key, in order.
func (h Headers) Values(key string) []string {
	key = strings.ToLower(key)
	var out []string
	for _, e := range h {
		if e.Key == key {
			out = append(out, e.Value)
		}
	}
	return out
}

func (h Headers) clone() Headers { return append(Headers(nil), h...) }

// set replaces the first entry of key and drops the others, or appends the key.
func (h *Headers) set(key, value string) {
	out := (*h)[:0]
	replaced := false
	for _, e := range *h {
		if e.Key != key {
			out = append(out, e)
			continue
		}
		if !replaced {
			out = append(out, Header{Key: key, Value: value})
			replaced = true
		}
	}
	if !replaced {
		out = append(out, Header{Key: key, Value: value})
	}
	*h = out
}

func (h *Headers) remove(key string) {
	out := (*h)[:0]
	for _, e := range *h {
		if e.Key != key {
			out = append(out, e)
		}
	}
	*h = out
}

// proto encodes the headers the way Envoy sends them: values in raw_value only.
func (h Headers) proto() *corev3.HeaderMap {
	m := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, 0, len(h))}
	for _, e := range h {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: e.Key, RawValue: []byte(e.Value)})
	}
	return m
}

// applyHeaderMutation changes h as Envoy's ext_proc filter does under the default
// header mutation rules. Mutations Envoy drops silently are described in *ignored;
// mutations Envoy rejects (failing the HTTP request) are returned as an error.
func applyHeaderMutation(h *Headers, m *extprocv3.HeaderMutation, ignored *[]string) error {
	if m == nil {
		return nil
	}
	// Envoy applies removals before sets.
	for _, name := range m.GetRemoveHeaders() {
		if !validHeaderName(name) {
			return fmt.Errorf("remove_headers: invalid header name %q", name)
		}
		key := strings.ToLower(name)
		if strings.HasPrefix(key, ":") || key == "host" {
			*ignored = append(*ignored, fmt.Sprintf("remove_headers %q: system headers cannot be removed", key))
			continue
		}
		h.remove(key)
	}
	for _, opt := range m.GetSetHeaders() {
		hv := opt.GetHeader()
		if hv == nil {
			continue
		}
		if hv.GetValue() != "" && len(hv.GetRawValue()) != 0 {
			return fmt.Errorf("set_headers %q: only one of value and raw_value may be set", hv.GetKey())
		}
		if hv.GetValue() != "" {
			// Envoy reads raw_value only; a header sent in value arrives empty.
			*ignored = append(*ignored, fmt.Sprintf("set_headers %q: the value field is ignored by Envoy, use raw_value", hv.GetKey()))
		}
		value := string(hv.GetRawValue())
		if !validHeaderName(hv.GetKey()) || !validHeaderValue(value) {
			return fmt.Errorf("set_headers %q: invalid character in header name or value %q", hv.GetKey(), value)
		}
		key := strings.ToLower(hv.GetKey())
		if reason := protectedHeader(key); reason != "" {
			*ignored = append(*ignored, fmt.Sprintf("set_headers %q: %s", key, reason))
			continue
		}
		_, exists := h.Lookup(key)
		switch opt.GetAppendAction() {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			// The zero value defers to the deprecated append flag, which defaults to
			// false in ext_proc (unlike elsewhere in Envoy): overwrite.
			//lint:ignore SA1019 Envoy still honours the deprecated flag here, so the stand-in does too.
			if opt.GetAppend().GetValue() {
				*h = append(*h, Header{Key: key, Value: value})
			} else {
				h.set(key, value)
			}
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if !exists {
				*h = append(*h, Header{Key: key, Value: value})
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			h.set(key, value)
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if exists {
				h.set(key, value)
			}
		default:
			return fmt.Errorf("set_headers %q: invalid append_action %v", key, opt.GetAppendAction())
		}
	}
	return nil
}

// protectedHeader says why the default mutation rules refuse to set key, or "".
func protectedHeader(key string) string {
	switch {
	case key == "host" || key == ":authority" || key == ":scheme" || key == ":method":
		return "routing headers cannot be modified under the default mutation rules"
	case strings.HasPrefix(key, "x-envoy"):
		return "x-envoy headers cannot be modified under the default mutation rules"
	}
	return ""
}

// validHeaderName accepts an RFC 9110 token, optionally prefixed with ':' for pseudo-headers.
func validHeaderName(name string) bool {
	name = strings.TrimPrefix(name, ":")
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validHeaderValue mirrors the HTTP/2 field-value check Envoy applies: no control
// characters other than horizontal tab, and no DEL.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
