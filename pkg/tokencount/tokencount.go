// Package tokencount is how igw counts a prompt's tokens without the model's
// tokenizer: about four bytes of text per token. The endpoint picker sizes
// prompts and prefix-cache blocks with it; the simulator's stand-in tokenizer
// (pkg/tokenizer) makes exactly four bytes one token, so that simulated
// servers and the picker agree on every prompt's length.
package tokencount

// CharsPerToken is how many bytes of text make one token.
const CharsPerToken = 4

// Estimate is the number of tokens text counts as: a partial last token
// counts whole.
func Estimate(text string) int { return (len(text) + CharsPerToken - 1) / CharsPerToken }
