package sim

import "time"

// EventKind says what happened to a request.
type EventKind uint8

const (
	// EventFirstToken: the request's first output token was sampled.
	EventFirstToken EventKind = iota + 1
	// EventToken: a later output token was sampled (only with token events on).
	EventToken
	// EventFinish: the request produced its last token and left the pod. It
	// follows the same step's token event.
	EventFinish
	// EventFailed: the request was dropped unfinished (a crash fault reset its
	// connection).
	EventFailed
)

func (k EventKind) String() string {
	switch k {
	case EventFirstToken:
		return "first-token"
	case EventToken:
		return "token"
	case EventFinish:
		return "finish"
	case EventFailed:
		return "failed"
	}
	return "unknown"
}

// Event is one output of the engine at the end of a step.
type Event struct {
	Kind      EventKind
	RequestID uint64
	// Time is the engine time of the end of the step that produced the event.
	Time time.Duration
	// Tokens is the number of output tokens emitted so far, this one included.
	Tokens int
	// The remaining fields are set on EventFinish only.
	Arrival    time.Duration
	FirstToken time.Duration
	// PromptTokens and CachedTokens are the prompt length and its prefix-cache hit
	// at first admission (OpenAI usage's cached_tokens).
	PromptTokens int
	CachedTokens int
	Preemptions  int
}
