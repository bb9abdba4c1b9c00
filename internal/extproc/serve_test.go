package extproc

import (
	"errors"
	"io"
	"slices"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// scriptedStream hands out its messages, then ends with end.
type scriptedStream struct {
	extprocv3.ExternalProcessor_ProcessServer
	msgs []*extprocv3.ProcessingRequest
	end  error
}

func (s *scriptedStream) Recv() (*extprocv3.ProcessingRequest, error) {
	if len(s.msgs) == 0 {
		return nil, s.end
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

// Serve tells of the protocol config before handling its message, hands on
// every message, ends without error when Envoy ends the stream, and stops at
// the first error of handle or of the stream.
func TestServeHandsOnEveryMessageUntilTheStreamEnds(t *testing.T) {
	script := func() []*extprocv3.ProcessingRequest {
		return []*extprocv3.ProcessingRequest{
			{ProtocolConfig: &extprocv3.ProtocolConfiguration{}, Request: &extprocv3.ProcessingRequest_RequestHeaders{}},
			{Request: &extprocv3.ProcessingRequest_RequestBody{}},
			{Request: &extprocv3.ProcessingRequest_ResponseHeaders{}},
		}
	}
	broken := errors.New("broken")
	for _, c := range []struct {
		name      string
		end       error
		failAt    int // the message handle fails on; -1 for none
		wantSeen  []string
		wantError error
	}{
		{"EOF", io.EOF, -1, []string{"config", "0", "1", "2"}, nil},
		{"cancelled", status.Error(codes.Canceled, "gone"), -1, []string{"config", "0", "1", "2"}, nil},
		{"stream error", broken, -1, []string{"config", "0", "1", "2"}, broken},
		{"handle error", io.EOF, 1, []string{"config", "0", "1"}, broken},
	} {
		var seen []string
		n := 0
		err := Serve(&scriptedStream{msgs: script(), end: c.end},
			func(*extprocv3.ProtocolConfiguration) { seen = append(seen, "config") },
			func(*extprocv3.ProcessingRequest) error {
				seen = append(seen, string(rune('0'+n)))
				n++
				if n-1 == c.failAt {
					return broken
				}
				return nil
			})
		if !errors.Is(err, c.wantError) || (c.wantError == nil && err != nil) || !slices.Equal(seen, c.wantSeen) {
			t.Errorf("%s: Serve returned %v after %v, want %v after %v", c.name, err, seen, c.wantError, c.wantSeen)
		}
	}
	if err := Serve(&scriptedStream{msgs: script(), end: io.EOF}, nil, func(*extprocv3.ProcessingRequest) error { return nil }); err != nil {
		t.Errorf("without announced: %v", err)
	}
}
