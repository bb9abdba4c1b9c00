package globalsummary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Encode returns s as JSON after validating it: a member never sends what the
// hub would reject.
func Encode(s *Summary) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("global summary: %w", err)
	}
	return json.Marshal(s)
}

// Decode reads one document strictly: exactly one JSON object, no unknown
// fields, no trailing data, at most MaxDocumentBytes, and valid (Validate).
// Every error starts with "global summary:" and says what is wrong.
func Decode(data []byte) (*Summary, error) {
	if len(data) > MaxDocumentBytes {
		return nil, fmt.Errorf("global summary: %d bytes; at most %d", len(data), MaxDocumentBytes)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("global summary: not a JSON object (starts with %q)", prefix(trimmed))
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var s Summary
	if err := dec.Decode(&s); err != nil {
		var pe *time.ParseError
		if errors.As(err, &pe) { // the one time field; encoding/json does not name it
			return nil, fmt.Errorf("global summary: generatedAt: %w", err)
		}
		return nil, fmt.Errorf("global summary: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("global summary: data after the document at byte %d", dec.InputOffset())
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("global summary: %w", err)
	}
	return &s, nil
}

func prefix(b []byte) string {
	if len(b) > 16 {
		b = b[:16]
	}
	return string(b)
}
