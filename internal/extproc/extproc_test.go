package extproc

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/igw-dev/igw/pkg/apierror"
)

func TestImmediateCarriesTheErrorAndWhoAnswered(t *testing.T) {
	e := apierror.BadRequest("invalid_json", "bad")
	ir := Immediate("bbr", e).GetImmediateResponse()
	if ir.GetStatus().GetCode() != 400 || ir.GetDetails() != "igw_bbr_invalid_json" || string(ir.GetBody()) != string(e.JSON()) {
		t.Fatalf("%v", ir)
	}
	if h := ir.GetHeaders().GetSetHeaders(); len(h) != 1 || h[0].GetHeader().GetKey() != "content-type" {
		t.Fatalf("headers %v, want the content type only", h)
	}
	e.RetryAfterSeconds = 3
	h := Immediate("epp", e).GetImmediateResponse().GetHeaders().GetSetHeaders()
	if len(h) != 2 || h[1].GetHeader().GetKey() != "retry-after" || string(h[1].GetHeader().GetRawValue()) != "3" {
		t.Fatalf("headers %v, want retry-after 3", h)
	}
}

func TestAppendRequestChunksEndsTheStreamUnlessTrailersFollow(t *testing.T) {
	for _, c := range []struct {
		chunks   [][]byte
		trailers bool
		want     []bool // end_of_stream per reply
	}{
		{nil, false, []bool{true}},
		{nil, true, []bool{false}},
		{[][]byte{[]byte("a"), []byte("b")}, false, []bool{false, true}},
		{[][]byte{[]byte("a"), []byte("b")}, true, []bool{false, false}},
	} {
		got := AppendRequestChunks(nil, c.chunks, c.trailers)
		if len(got) != len(c.want) {
			t.Fatalf("%q: %d replies", c.chunks, len(got))
		}
		for i, r := range got {
			sr := r.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
			if sr.GetEndOfStream() != c.want[i] || (len(c.chunks) > 0 && string(sr.GetBody()) != string(c.chunks[i])) {
				t.Fatalf("%q trailers=%v: reply %d is %v", c.chunks, c.trailers, i, sr)
			}
		}
	}
}

func TestHeaderValuePrefersRawValue(t *testing.T) {
	for _, c := range []struct {
		hv   *corev3.HeaderValue
		want string
	}{
		{&corev3.HeaderValue{Key: "k", RawValue: []byte("raw"), Value: "old"}, "raw"},
		{&corev3.HeaderValue{Key: "k", Value: "old"}, "old"},
		{&corev3.HeaderValue{Key: "k"}, ""},
	} {
		if got := HeaderValue(c.hv); got != c.want {
			t.Errorf("%v: %q, want %q", c.hv, got, c.want)
		}
	}
}
