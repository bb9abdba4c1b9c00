package extproc

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// TestHeldRequestSaysWhenTheRequestIsWhole: a request without a body is
// whole with its headers; a streamed body when its last chunk comes; a
// buffered body with its one message, after the headers were answered; a
// body past the limit is a 413.
func TestHeldRequestSaysWhenTheRequestIsWhole(t *testing.T) {
	var h HeldRequest
	if whole, replies := h.Headers(&extprocv3.HttpHeaders{EndOfStream: true}); !whole || replies != nil || !h.HeadersOnly {
		t.Fatalf("headers only: whole %v, replies %v, HeadersOnly %v", whole, replies, h.HeadersOnly)
	}

	h = HeldRequest{}
	if whole, replies := h.Headers(&extprocv3.HttpHeaders{}); whole || replies != nil {
		t.Fatalf("streamed headers: whole %v, replies %v; want neither", whole, replies)
	}
	if whole, tooLarge := h.Body(&extprocv3.HttpBody{Body: []byte("12345")}, 10); whole || tooLarge != nil {
		t.Fatalf("first chunk: whole %v, %v", whole, tooLarge)
	}
	if whole, tooLarge := h.Body(&extprocv3.HttpBody{Body: []byte("678"), EndOfStream: true}, 10); !whole || tooLarge != nil || h.Size != 8 {
		t.Fatalf("last chunk: whole %v, %v, size %d", whole, tooLarge, h.Size)
	}

	h = HeldRequest{Buffered: true}
	if whole, replies := h.Headers(&extprocv3.HttpHeaders{}); whole || len(replies) != 1 || replies[0].GetRequestHeaders() == nil {
		t.Fatalf("buffered headers: whole %v, replies %v; want one headers reply", whole, replies)
	}
	if whole, _ := h.Body(&extprocv3.HttpBody{Body: []byte("12345")}, 10); !whole {
		t.Fatal("a buffered body is whole in its one message")
	}

	h = HeldRequest{}
	if _, tooLarge := h.Body(&extprocv3.HttpBody{Body: []byte("12345678901")}, 10); tooLarge == nil || tooLarge.Status != 413 {
		t.Fatalf("past the limit: %v, want 413", tooLarge)
	}
}
