package synth

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"

	"ringlm/gguf"
	"ringlm/tokenizer"
)

// builtinCorpus trains the built-in vocabulary: a few hundred merges is
// enough for tiny test models to see multi-byte tokens, real merges and
// special tokens without shipping a 100k-token vocabulary.
const builtinCorpus = `The quick brown fox jumps over the lazy dog. A model reads tokens and writes tokens;
the server streams them to the client as soon as they are sampled. In the beginning there was
the ring: the host writes work into it, the device reads the work, and the tokens come back.
Every request has a prompt, a number of tokens to generate, and a temperature. The scheduler
decides which sequences run in each step, and the cache keeps the keys and values of every token
that was seen before. When the memory runs out, the scheduler waits or preempts a sequence and
computes it again later. Nothing is lost, and nothing is computed twice when a prefix is shared.
func main() { for i := 0; i < 10; i++ { fmt.Println("hello, world", i) } }
package engine // import "ringlm/engine"
if err != nil { return nil, fmt.Errorf("open %s: %w", name, err) }
Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 3.14159 42.
Questions? Answers! (Parentheses) [brackets] {braces} "quotes" 'single' -- dashes and_underscores.`

// Special tokens of the built-in vocabulary (ChatML, as Qwen uses).
var builtinSpecials = []string{"<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"}

const chatMLTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

const builtinMerges = 252 // 256 bytes + merges + 4 specials = 512 tokens

// builtinVocab is a byte-level BPE vocabulary (tokenizer.ggml.model gpt2)
// trained on builtinCorpus, returned as GGUF tokenizer metadata. Trained
// once per process; callers must not modify the result.
var builtinVocab = sync.OnceValue(trainBuiltinVocab)

func trainBuiltinVocab() []gguf.KV {
	tokens, merges := trainBPE(builtinCorpus, builtinMerges)
	types := make([]int32, len(tokens), len(tokens)+len(builtinSpecials))
	for i := range types {
		types[i] = 1 // normal
	}
	bos := int32(len(tokens))
	for _, s := range builtinSpecials {
		tokens = append(tokens, s)
		types = append(types, 3) // control
	}
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.String("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.String("gpt-2")}, // llama.cpp reads "gpt-2", not "gpt2"
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strings(tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Int32s(types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.Strings(merges)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32(uint32(bos))},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32(uint32(bos + 1))},
		{Key: "tokenizer.ggml.eot_token_id", Value: gguf.Uint32(uint32(bos + 3))},
		{Key: "tokenizer.ggml.padding_token_id", Value: gguf.Uint32(uint32(bos + 1))},
		{Key: "tokenizer.ggml.add_bos_token", Value: gguf.Bool(true)},
		{Key: "tokenizer.ggml.add_eos_token", Value: gguf.Bool(false)},
		{Key: "tokenizer.chat_template", Value: gguf.String(chatMLTemplate)},
	}
}

// trainBPE learns n merges over the corpus split into words the way the
// gpt2 pre-tokenizer splits (an optional space, then letters, digits or
// other symbols), most frequent pair first, ties broken by the pair's text.
func trainBPE(corpus string, n int) (tokens, merges []string) {
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(tokenizer.ByteRune(byte(b))))
	}
	counts := map[string]int{}
	for _, w := range splitWords(corpus) {
		counts[w]++
	}
	type word struct {
		parts []string
		count int
	}
	var words []word
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var parts []string
		for _, b := range []byte(k) {
			parts = append(parts, string(tokenizer.ByteRune(byte(b))))
		}
		words = append(words, word{parts, counts[k]})
	}
	for len(merges) < n {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.parts); i++ {
				pairs[[2]string{w.parts[i], w.parts[i+1]}] += w.count
			}
		}
		var best [2]string
		bestN := 0
		for p, c := range pairs {
			if c > bestN || (c == bestN && p[0]+" "+p[1] < best[0]+" "+best[1]) {
				best, bestN = p, c
			}
		}
		if bestN == 0 {
			break
		}
		merged := best[0] + best[1]
		merges = append(merges, best[0]+" "+best[1])
		if !slices.Contains(tokens, merged) { // two splits can join to one token
			tokens = append(tokens, merged)
		}
		for wi := range words {
			p := words[wi].parts
			out := p[:0]
			for i := 0; i < len(p); i++ {
				if i+1 < len(p) && p[i] == best[0] && p[i+1] == best[1] {
					out = append(out, merged)
					i++
				} else {
					out = append(out, p[i])
				}
			}
			words[wi].parts = out
		}
	}
	return tokens, merges
}

func splitWords(s string) []string {
	var out []string
	class := func(r rune) int {
		switch {
		case unicode.IsLetter(r):
			return 1
		case unicode.IsDigit(r):
			return 2
		case unicode.IsSpace(r):
			return 3
		}
		return 4
	}
	rs := []rune(s)
	for i := 0; i < len(rs); {
		start := i
		if rs[i] == ' ' && i+1 < len(rs) && class(rs[i+1]) != 3 {
			i++
		}
		c := class(rs[i])
		for i < len(rs) && class(rs[i]) == c {
			i++
		}
		out = append(out, string(rs[start:i]))
	}
	return out
}

// padVocab pads the token list to size with [PAD<id>] tokens of type
// unused, as llama.cpp's converter does when a model's embedding has more
// rows than the tokenizer has tokens. It returns the final vocabulary size.
func padVocab(kvs []gguf.KV, size int) ([]gguf.KV, int, error) {
	kvs = slices.Clone(kvs)
	idx := map[string]int{}
	for i, kv := range kvs {
		idx[kv.Key] = i
	}
	ti, ok := idx["tokenizer.ggml.tokens"]
	if !ok {
		return nil, 0, fmt.Errorf("synth: tokenizer metadata has no tokenizer.ggml.tokens")
	}
	tokens, ok := kvs[ti].Value.StringSlice()
	if !ok {
		return nil, 0, fmt.Errorf("synth: tokenizer.ggml.tokens is not an array of strings")
	}
	n := len(tokens)
	if n >= size {
		return kvs, n, nil
	}
	tokens = slices.Clone(tokens)
	for id := n; id < size; id++ {
		tokens = append(tokens, fmt.Sprintf("[PAD%d]", id))
	}
	kvs[ti].Value = gguf.Strings(tokens)
	if i, ok := idx["tokenizer.ggml.token_type"]; ok {
		if types, ok := kvs[i].Value.Int32Slice(); ok {
			types = slices.Clone(types)
			for len(types) < size {
				types = append(types, 5) // unused
			}
			kvs[i].Value = gguf.Int32s(types)
		}
	}
	if i, ok := idx["tokenizer.ggml.scores"]; ok {
		if scores, ok := kvs[i].Value.Float32Slice(); ok {
			scores = slices.Clone(scores)
			for len(scores) < size {
				scores = append(scores, -1000)
			}
			kvs[i].Value = gguf.Float32s(scores)
		}
	}
	return kvs, size, nil
}

// Describe is a one-line summary of a shape for logs and `synth` output.
func (s Shape) Describe(vocab int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: dim %d, %d layers, %d heads (%d kv) of %d, ffn %d, vocab %d, %.1fM params",
		s.Arch, s.Dim, s.Layers, s.Heads, s.KVHeads, s.HeadDim, s.FFN, vocab, float64(s.Params(vocab))/1e6)
	return b.String()
}
