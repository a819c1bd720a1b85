package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Pre-tokenizer families. tokenizer.ggml.pre names the regexes a byte-level
// BPE vocabulary is split with before the merges run; llama.cpp
// (src/llama-vocab.cpp) maps each name it accepts to one of a few dozen
// regex lists, and ringlm maps the same names to the same lists.
//
// A family is a chain of stages. The first stage cuts the text; each
// later stage cuts every piece the one before produced. A stage keeps
// both its matches and the text between them as pieces (HF's Split with
// the Isolated behaviour, llama.cpp's unicode_regex_split), so look-ahead
// and $ see the end of the piece, not of the text.
//
// Patterns are HF's tokenizer.json originals where llama.cpp rewrote them
// for std::regex (llama.cpp turns (?i:'s) into '[sS] and approximates
// \p{Lu} by "a letter but not a-z"); the originals are what the
// vocabularies were trained with. Classes follow Unicode throughout, as
// HF's engine does; llama.cpp's collapsed-category std::regex path
// differs from it in corners (its ASCII \p{S} lacks '~').

// preTokenizer is the split of one tokenizer.ggml.pre name.
type preTokenizer struct {
	name string // the family, for errors and tests
	// scan is set when the whole split is one hand-written scanner (of
	// pattern): the fast path of the common vocabularies.
	scan    func(s string, i int) int
	pattern string
	stages  []preStage
	// nfc: HF's NFC normalizer runs first (Qwen2's tokenizer.json asks for
	// it; llama.cpp skips it).
	nfc bool
	// ignoreMerges: a pre-token that is itself a token is not merged
	// (HF's ignore_merges; llama.cpp sets it for these families).
	ignoreMerges bool
	// addBOS: llama.cpp adds BOS for this family when the file does not
	// say (tokenizer.ggml.add_bos_token absent).
	addBOS bool
}

// preStage is one regex of a chain, applied by a hand scanner, a custom
// splitter or the regex engine.
type preStage struct {
	pattern string
	scan    func(s string, i int) int
	cut     func(s string, off int, dst []span) []span
	re      *lazyRegex
}

// lazyRegex compiles its pattern on first use, so that a process pays only
// for the families of the vocabularies it loads.
type lazyRegex struct {
	once sync.Once
	prog *reProg
	err  error
}

func reStage(pattern string) preStage {
	return preStage{pattern: pattern, re: &lazyRegex{}}
}

// compile readies the family's regexes (New calls it).
func (p *preTokenizer) compile() error {
	for i := range p.stages {
		s := &p.stages[i]
		if s.re == nil {
			continue
		}
		s.re.once.Do(func() { s.re.prog, s.re.err = compileRegex(s.pattern) })
		if s.re.err != nil {
			return fmt.Errorf("tokenizer: pre-tokenizer %s: %w", p.name, s.re.err)
		}
	}
	return nil
}

// Patterns of the hand scanners, for the stages that use them.
const (
	patGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	patCL100k = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patO200k  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

var (
	stageGPT2  = preStage{pattern: patGPT2, scan: scanGPT2}
	stageQwen2 = preStage{pattern: patQwen2, scan: scanQwen2}
	stageO200k = preStage{pattern: patO200k, scan: scanO200k}
)

// Character ranges of the CJK-aware families, written with escapes: some
// of these characters have canonical decompositions, and an editor's NFC
// would silently change the ranges.
const (
	// DeepSeek LLM's letters: the cased letters (Lu, Ll, Lt) of the
	// scripts it splits words of.
	dsLetters = "A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af" +
		"\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5" +
		"\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba" +
		"\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45" +
		"\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe" +
		"\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc" +
		"\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134" +
		"\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee" +
		"\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf" +
		"\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3" +
		"\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df" +
		"\U0001e900-\U0001e943"
	// DeepSeek LLM's punctuation: ASCII and fullwidth symbols, quotes,
	// the ideographic space and full stop.
	dsPunct = "!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002"
	// DeepSeek's CJK: unified ideographs to U+9FA5, U+0800 to U+4E00,
	// Hangul syllables and Jamo extended-B.
	dsCJK = "\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff"
	// DeepSeek V3's: unified ideographs to U+9FA5, hiragana, katakana.
	dsV3CJK = "\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff"
	// Poro, BLOOM: anything but whitespace and ( | ) . , ! ? … 。 ， 、 । ۔ ،
	poroWord = ` ?[^(\s|.,!?` + "\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c" + `)]+`
	// Youtu: Hangul, CJK punctuation, bopomofo, CJK.
	youtuCJK = "[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-\u303f\ufe30-\ufe4f]+|[\u3105-\u312f]+|[" + dsV3CJK + "]+"
	// AFMoE: CJK, kana, halfwidth kana, Kangxi radicals, Thai, Lao, Khmer,
	// Myanmar, Hangul.
	afmoeCJK = "[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f\u2f00-\u2fdf" +
		"\u0e40-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff\uac00-\ud7af\u1100-\u11ff]+"
	// The ASCII punctuation DeepSeek V3 lets start an English word.
	asciiPunct = `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~]`
)

// The families, by llama.cpp's LLAMA_VOCAB_PRE_TYPE_* names.
var (
	// llama.cpp's default for a vocabulary without a pre-tokenizer name:
	// punctuation runs, then GPT-2's split, then digit runs in threes
	// from the left ("3333" is "333" "3").
	preDefault = preTokenizer{name: "default", stages: []preStage{
		reStage(`[\p{P}\$\+<=>\^~\|]+`), stageGPT2, reStage(`\p{N}+`), reStage(`[0-9][0-9][0-9]`),
	}}
	preGPT2   = preTokenizer{name: "gpt-2", scan: scanGPT2, pattern: patGPT2}
	preLlama3 = preTokenizer{name: "llama3", scan: scanLlama3, pattern: patCL100k, ignoreMerges: true, addBOS: true}
	// DBRX and Smaug use Llama 3's (cl100k's) regex; ringlm has always
	// skipped the merges of their whole-token pre-tokens, as for Llama 3.
	preDBRX     = preTokenizer{name: "dbrx", scan: scanLlama3, pattern: patCL100k, ignoreMerges: true}
	preChatGLM4 = preTokenizer{name: "chatglm4", scan: scanLlama3, pattern: patCL100k}
	preQwen2    = preTokenizer{name: "qwen2", scan: scanQwen2, pattern: patQwen2, nfc: true}
	// Qwen2's regex for vocabularies whose normalizer ringlm has not
	// verified: none, as llama.cpp.
	preQwen2Regex = preTokenizer{name: "qwen2-regex", scan: scanQwen2, pattern: patQwen2}
	preO200k      = preTokenizer{name: "gpt-4o", scan: scanO200k, pattern: patO200k, ignoreMerges: true}
	preStarcoder  = preTokenizer{name: "starcoder", stages: []preStage{reStage(`\p{N}`), stageGPT2}}
	preFalcon     = preTokenizer{name: "falcon", stages: []preStage{
		reStage(`[\p{P}\$\+<=>\^~\|` + "`" + `]+`), stageGPT2, reStage(`[0-9][0-9][0-9]`),
	}}
	preDeepseekLLM = preTokenizer{name: "deepseek-llm", stages: []preStage{
		reStage(`[\r\n]`), reStage(`\s?[` + dsLetters + `]+`), reStage(`\s?[` + dsPunct + `]+`),
		reStage(`\s+$`), reStage(`[` + dsCJK + `]+`), reStage(`\p{N}+`),
	}}
	preDeepseekCoder = preTokenizer{name: "deepseek-coder", stages: []preStage{
		reStage(`[\r\n]`), reStage(`\s?\p{L}+`), reStage(`\s?\p{P}+`), reStage(`[` + dsCJK + `]+`), reStage(`\p{N}`),
	}}
	preDeepseekV3 = preTokenizer{name: "deepseek-v3", stages: []preStage{
		reStage(`\p{N}{1,3}`), reStage(`[` + dsV3CJK + `]+`),
		reStage(asciiPunct + `[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	}}
	preSpark25 = preTokenizer{name: "spark2_5", stages: []preStage{
		reStage(`\p{N}{1,3}`), reStage(`[` + dsV3CJK + `]+`),
		reStage(asciiPunct + `[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+`),
		reStage(`\p{N}`),
	}}
	preYoutu = preTokenizer{name: "youtu", ignoreMerges: true, stages: []preStage{
		reStage(youtuCJK),
		reStage(`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	}}
	preQwen35 = preTokenizer{name: "qwen35", stages: []preStage{
		reStage(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	}}
	prePoro   = preTokenizer{name: "poro", stages: []preStage{reStage(poroWord)}}
	preViking = preTokenizer{name: "viking", stages: []preStage{reStage(poroWord), reStage(`\p{N}`)}}
	preTekken = preTokenizer{name: "tekken", ignoreMerges: true, addBOS: true, stages: []preStage{
		reStage(`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	}}
	preChameleon = preTokenizer{name: "chameleon", addBOS: true, stages: []preStage{
		reStage(`<sentinel:[0-9]+>`), reStage(`(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`), reStage(`([\t\n]|    |  )`),
		reStage(`\p{N}`), reStage(`[\p{P}!-/:-@\[-` + "`" + `{-~]`), stageGPT2,
	}}
	preTinyAya = preTokenizer{name: "tiny_aya", stages: []preStage{
		{pattern: `\d{1,3}(?=(?:\d{3})*\b)`, cut: cutDigitsBeforeBoundary}, stageO200k,
	}}
	preKimiK2 = preTokenizer{name: "kimi-k2", stages: []preStage{
		reStage(`[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	}}
	preSuperBPE = preTokenizer{name: "superbpe", stages: []preStage{
		reStage(`\p{N}+`), {pattern: `(?=(\d{3})+(?!\d))`, cut: cutDigitTriplesFromRight},
	}}
	// BailingMoE's tokenizer.json has possessive quantifiers (?+ and ++);
	// the classes they apply to cannot overlap what follows, so greedy
	// ones match the same.
	preBailing = preTokenizer{name: "bailingmoe", stages: []preStage{
		reStage(`'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`),
	}}
	preSeedCoder = preTokenizer{name: "seed-coder", stages: []preStage{
		reStage(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`),
	}}
	preUfakzeka = preTokenizer{name: "ufakzeka", stages: []preStage{
		reStage(`[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	}}
	preAFMoE = preTokenizer{name: "afmoe", stages: []preStage{
		{pattern: `\p{AFMoE_digits}`, cut: cutDigitGroupsFromRight},
		reStage(afmoeCJK),
		reStage(asciiPunct + `[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	}}
	preLaguna    = preTokenizer{name: "laguna", stages: []preStage{reStage(`[^\n]+|[\n]+`), stageQwen2}}
	preExaoneMoE = preTokenizer{name: "exaone-moe", stages: []preStage{
		reStage(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`),
	}}
	preMiniCPM5 = preTokenizer{name: "minicpm5", ignoreMerges: true, stages: []preStage{
		reStage(`\p{N}{1,3}`),
		reStage(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
	}}
	preJais2 = preTokenizer{name: "jais-2", stages: []preStage{
		reStage(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`),
	}}
)

// preTokenizers maps every tokenizer.ggml.pre name llama.cpp accepts for
// byte-level BPE vocabularies to its family, as src/llama-vocab.cpp does.
// "gpt2" and "o200k" are names older ringlm files carry.
var preTokenizers = map[string]preTokenizer{
	"":        preDefault,
	"default": preDefault,

	"llama3": preLlama3, "llama-v3": preLlama3, "llama-bpe": preLlama3, "falcon3": preLlama3,
	"falcon-h1": preLlama3, "pixtral": preLlama3, "midm-2.0": preLlama3, "lfm2": preLlama3,
	"jina-v5-nano": preLlama3,
	"dbrx":         preDBRX, "smaug-bpe": preDBRX,
	"chatglm-bpe": preChatGLM4, "glm4": preChatGLM4,

	"gpt-2": preGPT2, "gpt2": preGPT2, "phi-2": preGPT2, "mpt": preGPT2, "olmo": preGPT2, "jais": preGPT2,
	"trillion": preGPT2, "granite-docling": preGPT2, "jina-es": preGPT2, "jina-de": preGPT2,
	"gigachat": preGPT2, "jina-v1-en": preGPT2, "jina-v2-es": preGPT2, "jina-v2-de": preGPT2,
	"jina-v2-code": preGPT2, "roberta-bpe": preGPT2, "a.x-4.0": preGPT2, "mellum": preGPT2,
	"modern-bert": preGPT2, "exaone4": preGPT2,

	"starcoder": preStarcoder, "refact": preStarcoder, "command-r": preStarcoder, "smollm": preStarcoder,
	"codeshell": preStarcoder, "exaone": preStarcoder, "minerva-7b": preStarcoder, "mellum2": preStarcoder,

	"qwen2": preQwen2, "deepseek-r1-qwen": preQwen2,
	"stablelm2": preQwen2Regex, "megrez": preQwen2Regex, "kormo": preQwen2Regex, "f2llmv2": preQwen2Regex,
	"hunyuan": preQwen2Regex, "solar-open": preQwen2Regex, "grok-2": preQwen2Regex,
	"qwen35": preQwen35,

	"gpt-4o": preO200k, "o200k": preO200k, "llama4": preO200k, "kanana2": preO200k, "talkie": preO200k,
	"minimax-m2": preO200k, "granite-embed-multi-97m": preO200k,

	"falcon":         preFalcon,
	"deepseek-llm":   preDeepseekLLM,
	"deepseek-coder": preDeepseekCoder,
	"deepseek-v3":    preDeepseekV3, "hunyuan-dense": preDeepseekV3, "joyai-llm": preDeepseekV3, "hy_v4": preDeepseekV3,
	"spark2_5":  preSpark25,
	"youtu":     preYoutu,
	"poro-chat": prePoro, "bloom": prePoro, "gpt3-finnish": prePoro,
	"viking":    preViking,
	"tekken":    preTekken,
	"chameleon": preChameleon,
	"tiny_aya":  preTinyAya, "cohere2moe": preTinyAya,
	"kimi-k2":    preKimiK2,
	"superbpe":   preSuperBPE,
	"bailingmoe": preBailing, "bailingmoe2": preBailing, "llada-moe": preBailing,
	"seed-coder": preSeedCoder,
	"ufakzeka":   preUfakzeka,
	"afmoe":      preAFMoE,
	"laguna":     preLaguna,
	"exaone-moe": preExaoneMoE,
	"minicpm5":   preMiniCPM5,
	"jais-2":     preJais2,
}

// rawUTF8Pre are names llama.cpp accepts whose BPE runs over raw UTF-8
// with ▁ for spaces (SentencePiece-style BPE) rather than GPT-2's byte
// alphabet: a different algorithm, which ringlm does not implement.
var rawUTF8Pre = map[string]bool{
	"gemma4": true, "granite-embed-multi-311m": true, "sarvam-moe": true, "whitespace": true,
}

// llamaCppPre is the name llama.cpp writes for a family ringlm reads under
// an older name of its own.
var llamaCppPre = map[string]string{"gpt2": "gpt-2", "o200k": "gpt-4o"}

// CanonicalPre returns the tokenizer.ggml.pre name llama.cpp writes for
// name: older ringlm names ("gpt2", "o200k") become llama.cpp's ("gpt-2",
// "gpt-4o"); every other name is returned as is. Writers of GGUF files
// pass the name through it so that llama.cpp can load them.
func CanonicalPre(name string) string {
	if c, ok := llamaCppPre[name]; ok {
		return c
	}
	return name
}

// lookupPre finds the family of a tokenizer.ggml.pre name, or explains in
// one line why there is none.
func lookupPre(name string) (preTokenizer, error) {
	if p, ok := preTokenizers[name]; ok {
		return p, p.compile()
	}
	if rawUTF8Pre[name] {
		return preTokenizer{}, fmt.Errorf("tokenizer: pre-tokenizer %q (tokenizer.ggml.pre) is llama.cpp's SentencePiece-style BPE over raw UTF-8, which ringlm does not support", name)
	}
	return preTokenizer{}, fmt.Errorf("tokenizer: unknown pre-tokenizer %q (tokenizer.ggml.pre); known: %s", name, knownPre())
}

func knownPre() string {
	names := make([]string, 0, len(preTokenizers))
	for k := range preTokenizers {
		if k != "" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// split cuts s with the family's chain into st.spans.
func (p *preTokenizer) split(st *encState, s string) []span {
	cur := append(st.spans[:0], span{0, len(s)})
	next := st.spans2[:0]
	for i := range p.stages {
		stg := &p.stages[i]
		next = next[:0]
		for _, sp := range cur {
			piece := s[sp.start:sp.end]
			switch {
			case stg.scan != nil:
				next = scanSpans(stg.scan, piece, sp.start, next)
			case stg.cut != nil:
				next = stg.cut(piece, sp.start, next)
			default:
				next = st.re.splitRegex(stg.re.prog, piece, sp.start, next)
			}
		}
		cur, next = next, cur
	}
	st.spans, st.spans2 = cur, next
	return cur
}

func scanSpans(scan func(string, int) int, s string, off int, dst []span) []span {
	for i := 0; i < len(s); {
		j := scan(s, i)
		if j <= i || j > len(s) { // defensive: a scanner must advance
			j = i + runeLen(s, i)
		}
		dst = append(dst, span{off + i, off + j})
		i = j
	}
	return dst
}

// cutRuns cuts s at the points cuts gives for every maximal run [a,b) of
// characters in is (cuts appends them in order, a <= cut <= b, nothing
// for a run left in the text around it) and appends the pieces.
func cutRuns(s string, off int, dst []span, is func(rune) bool, cuts func(s string, a, b int, pts []int) []int) []span {
	var buf [16]int
	pts := buf[:0]
	for i := 0; i < len(s); {
		if !is(runeAt(s, i)) {
			i += runeLen(s, i)
			continue
		}
		a := i
		for i < len(s) && is(runeAt(s, i)) {
			i += runeLen(s, i)
		}
		pts = cuts(s, a, i, pts)
	}
	last := 0
	for _, c := range pts {
		if c > last {
			dst = append(dst, span{off + last, off + c})
			last = c
		}
	}
	if last < len(s) {
		dst = append(dst, span{off + last, off + len(s)})
	}
	return dst
}

func isNd(r rune) bool { return unicode.Is(unicode.Nd, r) }

// innerThrees appends the points inside (a,b) that leave a multiple of
// three characters after them: the cuts of a run into its remainder and
// threes. Digits may be several bytes long (Arabic-Indic, fullwidth).
func innerThrees(s string, a, b int, pts []int) []int {
	n := 0
	for i := a; i < b; i += runeLen(s, i) {
		n++
	}
	k := 0
	for i := a; i < b; i += runeLen(s, i) {
		if k > 0 && (n-k)%3 == 0 {
			pts = append(pts, i)
		}
		k++
	}
	return pts
}

// cutDigitsBeforeBoundary is the stage \d{1,3}(?=(?:\d{3})*\b) (Tiny Aya)
// without its quadratic backtracking: a run of decimal digits followed by
// a word boundary is isolated and cut into the remainder and threes; a run
// followed by a word character ("123abc") holds no match and stays in the
// text around it.
func cutDigitsBeforeBoundary(s string, off int, dst []span) []span {
	return cutRuns(s, off, dst, isNd, func(s string, a, b int, pts []int) []int {
		if isWordAt(s, b) {
			return pts
		}
		return append(innerThrees(s, a, b, append(pts, a)), b)
	})
}

// cutDigitTriplesFromRight is the stage (?=(\d{3})+(?!\d)) (SuperBPE): an
// empty match before every multiple of three decimal digits from the end
// of a run, including the run's start when its length is one.
func cutDigitTriplesFromRight(s string, off int, dst []span) []span {
	return cutRuns(s, off, dst, isNd, func(s string, a, b int, pts []int) []int {
		k := len(pts)
		pts = innerThrees(s, a, b, append(pts, a))
		if n := utf8.RuneCountInString(s[a:b]); n%3 != 0 {
			pts = append(pts[:k], pts[k+1:]...)
		}
		return pts
	})
}

// cutDigitGroupsFromRight is llama.cpp's custom AFMoE digit stage: runs of
// \p{N} end in groups of three, the remainder first; the text before a run
// stays with its first group.
func cutDigitGroupsFromRight(s string, off int, dst []span) []span {
	return cutRuns(s, off, dst, unicode.IsNumber, func(s string, a, b int, pts []int) []int {
		return append(innerThrees(s, a, b, pts), b)
	})
}
