package chat

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ardanlabs/jinja"
)

// BenchmarkRender renders a 200-turn conversation with testdata/chat/qwen2.5-style.jinja through Template
// (instrumented, limits.go) and through the bare engine, to show what the limits cost.
func BenchmarkRender(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("..", "testdata", "chat", "qwen2.5-style.jinja"))
	if err != nil {
		b.Fatal(err)
	}
	var ms []Message
	for i := range 100 {
		ms = append(ms, Message{"user", fmt.Sprintf("question %d about something", i)}, Message{"assistant", fmt.Sprintf("answer %d", i)})
	}
	msgs := Messages(ms)
	b.Run("limited", func(b *testing.B) {
		tm, err := Compile(string(src), "t", nil)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := tm.Render(msgs, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare", func(b *testing.B) {
		tm, err := jinja.Compile(rewriteIndentedTojson(string(src)))
		if err != nil {
			b.Fatal(err)
		}
		data := map[string]jinja.Value{"messages": jinja.NewList(msgs), "add_generation_prompt": jinja.NewBool(false), "tools": jinja.None()}
		for b.Loop() {
			if _, err := tm.RenderValues(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
