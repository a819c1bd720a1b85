package tokenizer

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"ringlm/gguf"
)

// A tiny byte-level tokenizer.json in the newer form: merges as pairs, a
// hole in the ids, special, non-special and special-looking added tokens.
const byteLevelJSON = `{
  "version": "1.0",
  "added_tokens": [
    {"id": 8, "content": "<|bos|>", "special": true, "normalized": false},
    {"id": 9, "content": "<|eot_id|>", "special": true, "normalized": false},
    {"id": 10, "content": "<think>", "special": false, "normalized": false},
    {"id": 11, "content": "<|fim|>", "special": false, "normalized": false}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {}},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "Ġ": 2, "hi": 3, "Ġh": 4, "Ġhi": 5, "!": 6}, "merges": [["h", "i"], ["Ġ", "h"], ["Ġh", "i"]]}
}`

func TestFromHFJSONByteLevel(t *testing.T) {
	v, err := FromHFJSON([]byte(byteLevelJSON), []byte(`{"eos_token": {"content": "<|eot_id|>"}, "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	wantTokens := []string{"h", "i", "Ġ", "hi", "Ġh", "Ġhi", "!", "[PAD7]", "<|bos|>", "<|eot_id|>", "<think>", "<|fim|>"}
	if !slices.Equal(v.Tokens, wantTokens) {
		t.Errorf("tokens %q", v.Tokens)
	}
	wantTypes := []int32{1, 1, 1, 1, 1, 1, 1, TypeUnused, TypeControl, TypeControl, TypeUserDefined, TypeControl}
	if !slices.Equal(v.Types, wantTypes) {
		t.Errorf("types %v, want %v", v.Types, wantTypes)
	}
	if !slices.Equal(v.Merges, []string{"h i", "Ġ h", "Ġh i"}) {
		t.Errorf("merges %q", v.Merges)
	}
	if v.Model != "gpt2" || v.Pre != "llama-bpe" || v.Scores != nil {
		t.Errorf("model %q pre %q scores %v", v.Model, v.Pre, v.Scores)
	}
	if v.BOS != 8 || !v.AddBOS || v.EOS != 9 || v.EOT != 9 || v.AddEOS || v.PAD != -1 || v.UNK != -1 {
		t.Errorf("specials: bos %d (%v) eos %d eot %d pad %d unk %d", v.BOS, v.AddBOS, v.EOS, v.EOT, v.PAD, v.UNK)
	}
	if v.ChatTemplate != "D" {
		t.Errorf("chat template %q", v.ChatTemplate)
	}
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode("hi hi!<think>"); !slices.Equal(got, []int32{3, 5, 6, 10}) {
		t.Errorf("Encode = %v", got)
	}
	if got := tk.EncodeWith("hi", EncodeOptions{AddSpecial: true}); !slices.Equal(got, []int32{8, 3}) {
		t.Errorf("Encode with BOS = %v", got)
	}
	if got := tk.Decode([]int32{8, 3, 5, 10}); got != "<|bos|>hi hi<think>" {
		t.Errorf("Decode = %q", got)
	}
}

const spmJSON = `{
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true},
    {"id": 1, "content": "<s>", "special": true},
    {"id": 2, "content": "</s>", "special": true}
  ],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0xE2>": 3, "<0x9D>": 4, "<0xA4>": 5, "▁": 6, "h": 7, "i": 8, "▁h": 9, "▁hi": 10},
    "merges": ["▁ h", "▁h i"]}
}`

func TestFromHFJSONSentencePiece(t *testing.T) {
	v, err := FromHFJSON([]byte(spmJSON), []byte(`{"add_bos_token": true, "add_eos_token": false, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "llama" || v.Pre != "default" || !v.AddSpacePrefix || !v.AddBOS || v.AddEOS {
		t.Errorf("model %q pre %q prefix %v addbos %v addeos %v", v.Model, v.Pre, v.AddSpacePrefix, v.AddBOS, v.AddEOS)
	}
	if v.BOS != 1 || v.EOS != 2 || v.UNK != 0 || v.PAD != -1 || v.EOT != -1 {
		t.Errorf("bos %d eos %d unk %d pad %d eot %d", v.BOS, v.EOS, v.UNK, v.PAD, v.EOT)
	}
	wantTypes := []int32{TypeControl, TypeControl, TypeControl, TypeByte, TypeByte, TypeByte, 1, 1, 1, 1, 1}
	if !slices.Equal(v.Types, wantTypes) {
		t.Errorf("types %v", v.Types)
	}
	if v.Scores[9] != 0 || v.Scores[10] != -1 {
		t.Errorf("scores of merge results: %v", v.Scores)
	}
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode("hi ❤"); !slices.Equal(got, []int32{10, 6, 3, 4, 5}) {
		t.Errorf("Encode = %v", got)
	}
	if got := tk.Decode([]int32{10, 6, 3, 4, 5}); got != "hi ❤" {
		t.Errorf("Decode = %q", got)
	}
	// A character with no byte tokens falls back to <unk>, fused.
	if got := tk.Encode("hé€"); !slices.Equal(got, []int32{9, 0}) {
		t.Errorf("Encode with unknown characters = %v", got)
	}
}

func TestFromHFJSONErrors(t *testing.T) {
	cases := map[string]string{
		"not json":      `{`,
		"unigram":       `{"model": {"type": "Unigram", "vocab": []}}`,
		"wordpiece":     `{"model": {"type": "WordPiece", "vocab": {"a": 0}}}`,
		"unknown regex": strings.Replace(byteLevelJSON, `\\p{N}{1,3}`, `\\p{N}{1,4}`, 1),
		"no family":     `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`,
		"negative id":   strings.Replace(byteLevelJSON, `"!": 6`, `"!": -6`, 1),
		"shared id":     strings.Replace(byteLevelJSON, `"!": 6`, `"!": 5`, 1),
		"bad merge":     strings.Replace(byteLevelJSON, `["h", "i"]`, `["h"]`, 1),
		"merge space":   strings.Replace(byteLevelJSON, `["h", "i"]`, `["h x", "i"]`, 1),
		"bad merges":    strings.Replace(byteLevelJSON, `[["h", "i"]`, `[[1, 2]`, 1),
	}
	for name, js := range cases {
		if _, err := FromHFJSON([]byte(js), nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := FromHFJSON([]byte(byteLevelJSON), []byte(`[`)); err == nil {
		t.Error("bad tokenizer_config.json: no error")
	}
}

func writeGGUF(t *testing.T, kvs []gguf.KV) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range kvs {
		w.Set(kv.Key, kv.Value)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGGUFRoundTrip(t *testing.T) {
	for _, name := range vocabNames {
		v := loadVocab(t, name)
		got, err := FromGGUF(writeGGUF(t, v.Metadata()))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("%s: vocabulary changed through GGUF", name)
		}
	}
	keys := []string{}
	for _, kv := range loadVocab(t, "mistral").Metadata() {
		keys = append(keys, kv.Key)
	}
	want := []string{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
		"tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
		"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
		"tokenizer.ggml.add_space_prefix"}
	if !slices.Equal(keys, want) {
		t.Errorf("mistral metadata keys %q", keys)
	}
}

// Keys llama.cpp treats as optional take its defaults.
func TestFromGGUFDefaults(t *testing.T) {
	f := writeGGUF(t, []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.String("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.String("llama-bpe")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strings([]string{"a", "b"})},
	})
	v, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if !v.AddBOS || v.AddEOS || v.AddSpacePrefix || v.BOS != -1 || v.Types != nil || v.Merges != nil {
		t.Errorf("defaults: %+v", v)
	}
	if _, err := New(v); err != nil {
		t.Errorf("New: %v", err)
	}
	f = writeGGUF(t, []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.String("llama")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strings([]string{"a", "b"})},
	})
	if v, err = FromGGUF(f); err != nil {
		t.Fatal(err)
	}
	if v.Pre != "default" || !v.AddBOS || !v.AddSpacePrefix {
		t.Errorf("llama defaults: %+v", v)
	}
	if _, err := FromGGUF(writeGGUF(t, []gguf.KV{{Key: "general.name", Value: gguf.String("x")}})); err == nil {
		t.Error("GGUF without a vocabulary: no error")
	}
}

// TestPreNamesWritten: imports and Metadata write the tokenizer.ggml.pre
// names llama.cpp writes and reads ("gpt-2", never ringlm's old "gpt2").
func TestPreNamesWritten(t *testing.T) {
	llama3Split := `{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}`
	if !strings.Contains(byteLevelJSON, llama3Split) {
		t.Fatal("byteLevelJSON changed")
	}
	gpt2Split := `{"type": "Split", "pattern": {"Regex": "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}`
	byteLevelOnly := `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`
	for _, pre := range []string{gpt2Split, byteLevelOnly} {
		v, err := FromHFJSON([]byte(strings.Replace(byteLevelJSON, llama3Split, pre, 1)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.Pre != "gpt-2" {
			t.Errorf("imported pre %q, want gpt-2", v.Pre)
		}
		if _, err := New(v); err != nil {
			t.Fatal(err)
		}
	}
	for in, want := range map[string]string{"gpt2": "gpt-2", "o200k": "gpt-4o", "deepseek-llm": "deepseek-llm"} {
		v := &Vocab{Model: "gpt2", Pre: in, Tokens: []string{"a"}}
		got := "(none)"
		for _, kv := range v.Metadata() {
			if kv.Key == "tokenizer.ggml.pre" {
				got, _ = kv.Value.Str()
			}
		}
		if got != want {
			t.Errorf("Metadata writes pre %q for %q, want %q", got, in, want)
		}
	}
}
