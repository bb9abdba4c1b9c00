package bbr

import (
	"errors"
	"fmt"
)

// ErrNotObject is returned for a valid JSON document that is not an object.
var ErrNotObject = errors.New("request body must be a JSON object")

// ModelTypeError is returned when the top-level "model" member is not a string.
type ModelTypeError struct {
	Kind string // "number", "boolean", "object" or "array"
}

func (e *ModelTypeError) Error() string {
	return fmt.Sprintf("invalid type for 'model': expected a string, but got %s %s instead", article(e.Kind), e.Kind)
}

func article(kind string) string {
	if kind == "object" || kind == "array" {
		return "an"
	}
	return "a"
}

// ExtractModel validates body as one JSON document and returns the value of its
// top-level "model" member. found is false when the member is absent or null.
//
// The rules are encoding/json's, so the gateway and a Go model server agree on
// every body: the whole document is validated (any syntax error anywhere, trailing
// data, or nesting deeper than 10000 is a *SyntaxError); keys match exactly after
// unescaping (\u escapes included), and when "model" appears more than once the
// last one wins; strings decode with invalid UTF-8 and lone surrogates replaced by
// U+FFFD. A document that is not an object is ErrNotObject, and a "model" that is
// not a string or null is a *ModelTypeError.
//
// Nothing is decoded except the model string itself: the cost is one pass over the
// bytes and no allocation besides the returned string.
func ExtractModel(body []byte) (model string, found bool, err error) {
	var s modelScanner
	if err := s.scan(body, true); err != nil {
		return "", false, err
	}
	return s.model(body)
}

// model reads the result of a scan that reached the end of a valid document.
func (s *modelScanner) model(doc []byte) (string, bool, error) {
	if s.root != '{' {
		return "", false, ErrNotObject
	}
	switch s.modelFirst {
	case 0, 'n':
		return "", false, nil
	case '"':
		return unquote(doc[s.modelStart+1:s.modelEnd-1], s.modelEscaped), true, nil
	case '{':
		return "", false, &ModelTypeError{Kind: "object"}
	case '[':
		return "", false, &ModelTypeError{Kind: "array"}
	case 't', 'f':
		return "", false, &ModelTypeError{Kind: "boolean"}
	default:
		return "", false, &ModelTypeError{Kind: "number"}
	}
}
