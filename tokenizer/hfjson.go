package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Pre-tokenizer regexes of known vocabularies, as tokenizer.json spells
// them, and the tokenizer.ggml.pre name llama.cpp's converter gives each.
var knownRegexes = map[string]string{
	patCL100k: "llama-bpe",
	patQwen2:  "qwen2",
	patO200k:  "gpt-4o",
	patGPT2:   "gpt-2",
}

// eotCandidates are the end-of-turn token texts llama.cpp recognizes, most
// specific first.
var eotCandidates = []string{
	"<|eot_id|>", "<|im_end|>", "<|return|>", "<|end|>", "<end_of_turn>",
	"<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>", "<|endoftext|>",
}

type hfAddedToken struct {
	ID      int    `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

type hfTokenizerFile struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type         string          `json:"type"`
		Vocab        json.RawMessage `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
		ByteFallback bool            `json:"byte_fallback"`
		UnkToken     *string         `json:"unk_token"`
	} `json:"model"`
}

// hfNode is any normalizer, pre-tokenizer, post-processor or decoder;
// Sequence types nest them.
type hfNode map[string]any

// walk calls f on n and every component nested in a Sequence.
func walkHF(raw json.RawMessage, f func(hfNode)) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n hfNode
	if err := json.Unmarshal(raw, &n); err != nil {
		return err
	}
	var rec func(n hfNode)
	rec = func(n hfNode) {
		f(n)
		for _, key := range []string{"normalizers", "pretokenizers", "decoders", "processors"} {
			if list, ok := n[key].([]any); ok {
				for _, c := range list {
					if m, ok := c.(map[string]any); ok {
						rec(m)
					}
				}
			}
		}
	}
	rec(n)
	return nil
}

func (n hfNode) str(key string) string { s, _ := n[key].(string); return s }

// FromHFJSON imports a HuggingFace tokenizer.json (with its
// tokenizer_config.json, which may be nil) the way llama.cpp's
// convert_hf_to_gguf.py does, giving the GGUF view of the vocabulary.
//
// Choices where the HF files say nothing: Llama 3 style vocabularies
// ("llama-bpe") add BOS unless the config says otherwise, as llama.cpp
// does; SentencePiece vocabularies get scores of minus the rank of the
// merge producing each token, so that score-ranked BPE (llama.cpp's) gives
// the merges' result.
func FromHFJSON(tokenizerJSON, tokenizerConfigJSON []byte) (*Vocab, error) {
	var f hfTokenizerFile
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	if f.Model.Type != "" && f.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer.json model type %q (only BPE)", f.Model.Type)
	}
	var vocab map[string]int
	if err := json.Unmarshal(f.Model.Vocab, &vocab); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json model.vocab: %w", err)
	}
	merges, err := parseHFMerges(f.Model.Merges)
	if err != nil {
		return nil, err
	}

	// What the pipeline components say about the vocabulary's family.
	var (
		byteLevel, byteLevelRegex, metaspace, prependSpace, replaceSpace bool
		regexes                                                          []string
	)
	err = walkHF(f.Normalizer, func(n hfNode) {
		switch n.str("type") {
		case "Prepend":
			prependSpace = prependSpace || n.str("prepend") == spmSpace
		case "Replace":
			if p, ok := n["pattern"].(map[string]any); ok && p["String"] == " " && n.str("content") == spmSpace {
				replaceSpace = true
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json normalizer: %w", err)
	}
	err = walkHF(f.PreTokenizer, func(n hfNode) {
		switch n.str("type") {
		case "ByteLevel":
			byteLevel = true
			if b, ok := n["use_regex"].(bool); !ok || b {
				byteLevelRegex = true
			}
		case "Split":
			if p, ok := n["pattern"].(map[string]any); ok {
				if r, ok := p["Regex"].(string); ok {
					regexes = append(regexes, r)
				}
			}
		case "Metaspace":
			metaspace = true
			scheme := n.str("prepend_scheme")
			aps, _ := n["add_prefix_space"].(bool)
			prependSpace = prependSpace || aps || scheme == "always" || scheme == "first"
		}
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json pre_tokenizer: %w", err)
	}
	if err := walkHF(f.Decoder, func(n hfNode) {
		if n.str("type") == "ByteLevel" {
			byteLevel = true
		}
	}); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json decoder: %w", err)
	}

	v := &Vocab{BOS: -1, EOS: -1, EOT: -1, PAD: -1, UNK: -1, Merges: merges}
	switch {
	case f.Model.ByteFallback || metaspace || replaceSpace:
		v.Model, v.Pre = "llama", "default"
		v.AddSpacePrefix = prependSpace
	case byteLevel:
		v.Model = "gpt2"
		switch {
		case len(regexes) == 1:
			pre, ok := knownRegexes[regexes[0]]
			if !ok {
				return nil, fmt.Errorf("tokenizer: unknown pre-tokenizer regex %q", regexes[0])
			}
			v.Pre = pre
		case len(regexes) == 0 && byteLevelRegex:
			v.Pre = "gpt-2"
		default:
			return nil, fmt.Errorf("tokenizer: unsupported pre-tokenizer with %d split regexes", len(regexes))
		}
	default:
		return nil, fmt.Errorf("tokenizer: BPE vocabulary is neither byte-level nor SentencePiece-style (byte_fallback / ▁ normalizer)")
	}

	// Tokens in id order; holes (ids nothing names) become [PAD{id}].
	n := 0
	for _, id := range vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: negative token id %d", id)
		}
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: negative added token id %d", a.ID)
		}
		n = max(n, a.ID+1)
	}
	if n > 1<<26 {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: token id %d is implausibly large", n-1)
	}
	v.Tokens = make([]string, n)
	v.Types = make([]int32, n)
	filled := make([]bool, n)
	for s, id := range vocab {
		if filled[id] {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: id %d used by %q and %q", id, v.Tokens[id], s)
		}
		v.Tokens[id], filled[id] = s, true
		v.Types[id] = TypeNormal
		if v.Model == "llama" && isByteToken(s) {
			v.Types[id] = TypeByte
		}
	}
	byContent := make(map[string]int32, len(f.AddedTokens))
	for _, a := range f.AddedTokens {
		v.Tokens[a.ID], filled[a.ID] = a.Content, true
		if a.Special || looksSpecial(a.Content) {
			v.Types[a.ID] = TypeControl
		} else {
			v.Types[a.ID] = TypeUserDefined
		}
		byContent[a.Content] = int32(a.ID)
	}
	for i := range v.Tokens {
		if !filled[i] {
			v.Tokens[i] = fmt.Sprintf("[PAD%d]", i)
			v.Types[i] = TypeUnused
		}
	}
	lookup := func(s string) int32 {
		if id, ok := byContent[s]; ok {
			return id
		}
		if id, ok := vocab[s]; ok {
			return int32(id)
		}
		return -1
	}

	if v.Model == "llama" {
		v.Scores = make([]float32, n)
		produced := make([]bool, n)
		for rank, m := range merges {
			a, b, _ := splitMerge(m)
			if id := lookup(a + b); id >= 0 && !produced[id] {
				produced[id] = true
				v.Scores[id] = -float32(rank)
			}
		}
		for i, s := range v.Tokens {
			if !produced[i] && v.Types[i] == TypeNormal && len([]rune(s)) > 1 {
				// Unreachable through the merges: rank it below them all.
				v.Scores[i] = -float32(len(merges) + 1)
			}
		}
	}

	// Special tokens and the post-processor's template.
	if f.Model.UnkToken != nil {
		v.UNK = lookup(*f.Model.UnkToken)
	}
	var cfg map[string]json.RawMessage
	if len(bytes.TrimSpace(tokenizerConfigJSON)) > 0 {
		if err := json.Unmarshal(tokenizerConfigJSON, &cfg); err != nil {
			return nil, fmt.Errorf("tokenizer: tokenizer_config.json: %w", err)
		}
	}
	tokenOf := func(key string) (int32, bool) {
		raw, ok := cfg[key]
		if !ok {
			return -1, false
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			var obj struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(raw, &obj) != nil || obj.Content == "" {
				return -1, false
			}
			s = obj.Content
		}
		if s == "" {
			return -1, false
		}
		return lookup(s), true
	}
	boolOf := func(key string) (bool, bool) {
		var b bool
		raw, ok := cfg[key]
		if !ok || json.Unmarshal(raw, &b) != nil {
			return false, false
		}
		return b, true
	}
	if id, ok := tokenOf("bos_token"); ok {
		v.BOS = id
	}
	if id, ok := tokenOf("eos_token"); ok {
		v.EOS = id
	}
	if id, ok := tokenOf("pad_token"); ok {
		v.PAD = id
	}
	if id, ok := tokenOf("unk_token"); ok && id >= 0 {
		v.UNK = id
	}
	tplBOS, tplEOS, hasTpl := templateSpecials(f.PostProcessor, lookup)
	if b, ok := boolOf("add_bos_token"); ok {
		v.AddBOS = b
	} else if hasTpl {
		v.AddBOS = tplBOS >= 0
	} else {
		v.AddBOS = v.Model == "llama" || v.Pre == "llama-bpe"
	}
	if b, ok := boolOf("add_eos_token"); ok {
		v.AddEOS = b
	} else if hasTpl {
		v.AddEOS = tplEOS >= 0
	}
	if v.BOS < 0 && tplBOS >= 0 {
		v.BOS = tplBOS
	}
	if v.EOS < 0 && tplEOS >= 0 {
		v.EOS = tplEOS
	}
	for _, s := range eotCandidates {
		if id := lookup(s); id >= 0 {
			v.EOT = id
			break
		}
	}
	if raw, ok := cfg["chat_template"]; ok {
		v.ChatTemplate = chatTemplate(raw)
	}
	return v, nil
}

// parseHFMerges accepts both forms: ["a b", ...] and [["a", "b"], ...].
func parseHFMerges(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err == nil {
		return lines, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json model.merges: %w", err)
	}
	lines = make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 || p[0] == "" || p[1] == "" {
			return nil, fmt.Errorf("tokenizer: tokenizer.json merge %d is not a pair: %q", i, p)
		}
		if strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
			// GGUF stores merges as "a b": a space inside a half cannot be
			// written unambiguously.
			return nil, fmt.Errorf("tokenizer: tokenizer.json merge %d %q holds a space", i, p)
		}
		lines[i] = p[0] + " " + p[1]
	}
	return lines, nil
}

// templateSpecials reads a TemplateProcessing post-processor's single
// template: a special token first means BOS is added, one last means EOS.
func templateSpecials(raw json.RawMessage, lookup func(string) int32) (bos, eos int32, ok bool) {
	bos, eos = -1, -1
	err := walkHF(raw, func(n hfNode) {
		if n.str("type") != "TemplateProcessing" || ok {
			return
		}
		single, _ := n["single"].([]any)
		ok = true
		special := func(e any) int32 {
			m, _ := e.(map[string]any)
			st, _ := m["SpecialToken"].(map[string]any)
			if st == nil {
				return -1
			}
			id, _ := st["id"].(string)
			return lookup(id)
		}
		if len(single) > 0 {
			bos = special(single[0])
			if len(single) > 1 {
				eos = special(single[len(single)-1])
			}
		}
	})
	if err != nil {
		return -1, -1, false
	}
	return bos, eos, ok
}

// chatTemplate reads tokenizer_config's chat_template: a string, or a list
// of named templates of which "default" (else the first) is taken.
func chatTemplate(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if json.Unmarshal(raw, &named) != nil || len(named) == 0 {
		return ""
	}
	for _, t := range named {
		if t.Name == "default" {
			return t.Template
		}
	}
	return named[0].Template
}

// looksSpecial mirrors convert_hf_to_gguf.py's does_token_look_special:
// some models register control tokens as non-special added tokens.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}
