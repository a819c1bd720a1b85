package tokenizer

import (
	"fmt"

	"ringlm/gguf"
)

// FromGGUF reads the vocabulary from a GGUF file's tokenizer.ggml.* keys.
// Load builds the tokenizer of a GGUF file's vocabulary (FromGGUF, then
// New); Vocab() returns the vocabulary. The file must stay open while the
// tokenizer is used.
func Load(f *gguf.File) (*Tokenizer, error) {
	v, err := FromGGUF(f)
	if err != nil {
		return nil, err
	}
	return New(v)
}

// Absent optional keys take llama.cpp's defaults: pre "default", BOS added
// and a space prefix for SentencePiece vocabularies, BOS added for the
// byte-level families llama.cpp adds it for (Llama 3, Tekken, Chameleon).
func FromGGUF(f *gguf.File) (*Vocab, error) {
	m, err := f.Tokenizer()
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	v := &Vocab{
		Model:          m.Model,
		Pre:            m.Pre,
		Tokens:         m.Tokens,
		Types:          m.TokenTypes,
		Scores:         m.Scores,
		Merges:         m.Merges,
		BOS:            m.BOS,
		EOS:            m.EOS,
		EOT:            m.EOT,
		PAD:            m.PAD,
		UNK:            m.UNK,
		AddBOS:         m.AddBOS,
		AddEOS:         m.AddEOS,
		AddSpacePrefix: m.AddSpacePrefix,
		ChatTemplate:   m.ChatTemplate,
	}
	if _, ok := f.Get("tokenizer.ggml.add_bos_token"); !ok && v.Model == "gpt2" {
		if p, ok := preTokenizers[v.Pre]; ok && p.addBOS {
			v.AddBOS = true
		}
	}
	return v, nil
}

// Metadata returns the vocabulary as GGUF metadata, under the keys and in
// the order llama.cpp's converter writes them, with the pre-tokenizer
// name llama.cpp writes (CanonicalPre). Absent ids (-1) and nil arrays
// are left out.
func (v *Vocab) Metadata() []gguf.KV {
	kvs := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.String(v.Model)},
		{Key: "tokenizer.ggml.pre", Value: gguf.String(CanonicalPre(v.Pre))},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strings(v.Tokens)},
	}
	if v.Scores != nil {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.scores", Value: gguf.Float32s(v.Scores)})
	}
	if v.Types != nil {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.token_type", Value: gguf.Int32s(v.Types)})
	}
	if v.Merges != nil {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.merges", Value: gguf.Strings(v.Merges)})
	}
	for _, id := range []struct {
		key string
		id  int32
	}{
		{"tokenizer.ggml.bos_token_id", v.BOS},
		{"tokenizer.ggml.eos_token_id", v.EOS},
		{"tokenizer.ggml.eot_token_id", v.EOT},
		{"tokenizer.ggml.unknown_token_id", v.UNK},
		{"tokenizer.ggml.padding_token_id", v.PAD},
	} {
		if id.id >= 0 {
			kvs = append(kvs, gguf.KV{Key: id.key, Value: gguf.Uint32(uint32(id.id))})
		}
	}
	kvs = append(kvs,
		gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: gguf.Bool(v.AddBOS)},
		gguf.KV{Key: "tokenizer.ggml.add_eos_token", Value: gguf.Bool(v.AddEOS)},
		gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: gguf.Bool(v.AddSpacePrefix)},
	)
	if v.ChatTemplate != "" {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template", Value: gguf.String(v.ChatTemplate)})
	}
	return kvs
}
