package chat

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkApply measures one rendering of a tool conversation by real
// models' templates (llama.cpp's test data beside the checkout), as each
// chat request pays it; BenchmarkCompile the parse a model pays once.
func BenchmarkApply(b *testing.B) {
	bat := loadBattery(b)
	var conv conversation
	for _, c := range bat.Conversations {
		if c.Name == "tool_call_string_arguments" {
			conv = c
		}
	}
	req := Request{Tools: bat.Tools, AddGenerationPrompt: true}
	for _, m := range conv.Messages {
		msg, err := ParseMessage(m)
		if err != nil {
			b.Fatal(err)
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, name := range []string{"Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja", "meetkai-functionary-medium-v3.2.jinja"} {
		src, err := os.ReadFile(filepath.Join(repoRoot(b), "..", "shared", "testdata", "llamacpp", "templates", name))
		if err != nil {
			b.Skipf("%s: %v (llama.cpp's test data is not beside the checkout)", name, err)
		}
		tm, err := Compile(string(src), "<s>", "</s>")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				out, err := tm.Apply(req)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n), "bytes/render")
		})
		b.Run("compile/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(string(src), "<s>", "</s>"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
