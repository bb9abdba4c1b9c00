package requestbody

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/requestbody/bodytest"
)

// BenchmarkParse512KiB parses a 512 KiB chat body (plain text; a newline every
// 80 bytes; a newline and quotes every ~60 bytes; the content followed by a thousand
// role keys, which must not cost a move each) with a reused Parser, against
// a plain copy of the body measured in the same run: body-copies is what one
// parse costs in copies of the body.
func BenchmarkParse512KiB(b *testing.B) {
	for _, c := range []struct{ name, unit, before, after string }{
		{"plain", "lorem ipsum ", `"role":"user",`, ""},
		{"lines", "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n", `"role":"user",`, ""},
		{"escaped", "He said \"yes\".\nThen\tleft; lorem ipsum dolor sit amet, sed do.\n", `"role":"user",`, ""},
		{"roles-after-content", "lorem ipsum ", "", strings.Repeat(`,"role":"user"`, 1000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			text := strings.Repeat(c.unit, (512<<10)/len(c.unit)+1)
			content, _ := json.Marshal(text)
			body := []byte(fmt.Sprintf(`{"model":"llama","stream":true,"messages":[{"role":"system","content":"Be brief."},{%s"content":%s%s}]}`, c.before, content, c.after))
			b.SetBytes(int64(len(body)))
			var p Parser
			dst := make([]byte, len(body))
			var parse, copying time.Duration
			for b.Loop() {
				t0 := time.Now()
				r, err := p.Parse(body)
				t1 := time.Now()
				copy(dst, body)
				copying += time.Since(t1)
				parse += t1.Sub(t0)
				if err != nil || len(r.Prompt) < len(text) {
					b.Fatal(err, len(r.Prompt))
				}
			}
			b.ReportMetric(float64(parse)/float64(max(copying, 1)), "body-copies")
		})
	}
}

// BenchmarkParseSmall is a typical short chat request.
func BenchmarkParseSmall(b *testing.B) {
	body := []byte(fmt.Sprintf(`{"model":"llama","stream":true,"max_tokens":64,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":%q}]}`,
		strings.Repeat("hello there ", 40)))
	var p Parser
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanOnce is what the standalone gateway reads of each body: the
// router's model and the picker's request, from one Scan, against the two
// passes it made before (ExtractModel, then Parse), in the same run.
//
//	go test ./pkg/requestbody -run '^$' -bench BenchmarkScanOnce
func BenchmarkScanOnce(b *testing.B) {
	for _, body := range []struct {
		name string
		body []byte
	}{{"code-64KiB", bodytest.Chat(64<<10, "llama", true)}, {"prose-512KiB", prose(512 << 10)}} {
		var p Parser
		b.Run(body.name+"/scan", func(b *testing.B) {
			b.SetBytes(int64(len(body.body)))
			for b.Loop() {
				if _, err := p.Scan(body.body).Request(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(body.name+"/two-passes", func(b *testing.B) {
			b.SetBytes(int64(len(body.body)))
			for b.Loop() {
				if _, _, err := ExtractModel(body.body); err != nil {
					b.Fatal(err)
				}
				if _, err := p.Parse(body.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// prose is a chat body of about size bytes of plain text.
func prose(size int) []byte {
	content, _ := json.Marshal(strings.Repeat("lorem ipsum ", size/12+1))
	return []byte(fmt.Sprintf(`{"model":"llama","stream":true,"messages":[{"role":"user","content":%s}]}`, content))
}
