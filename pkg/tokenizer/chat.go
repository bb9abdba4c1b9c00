package tokenizer

// Message is one chat message: a role and its text.
type Message struct {
	Role    string
	Content string
}

// RenderChat is the chat template of the simulated model: every message is a
// role header and its content, each token-aligned, followed by the assistant
// header the reply is generated after. Conversations that share their first
// messages therefore share their leading tokens, as with a real chat template.
func RenderChat(messages []Message) string {
	parts := make([]string, 0, 2*len(messages)+1)
	for _, m := range messages {
		parts = append(parts, "<|"+m.Role+"|>\n", m.Content)
	}
	parts = append(parts, "<|assistant|>\n")
	return Join(parts...)
}
