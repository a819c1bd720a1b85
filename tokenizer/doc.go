// Package tokenizer turns text into token ids and back exactly as
// HuggingFace tokenizers does, for vocabularies stored the GGUF way
// (tokenizer.ggml.* metadata).
//
// It owns:
//
//   - Vocab, the vocabulary as GGUF stores it, read with FromGGUF, written
//     with Vocab.Metadata, or imported from a HF tokenizer.json with
//     FromHFJSON the way llama.cpp's converter does;
//   - Tokenizer (New): byte-level BPE ("gpt2": GPT-2, Llama 3, Qwen2/3,
//     gpt-oss, DeepSeek, Falcon, StarCoder, ...) and SentencePiece-style BPE
//     ("llama": Llama 2, Mistral) with ▁ spaces and <0xXX> byte fallback;
//   - the pre-tokenizers of byte-level BPE: every tokenizer.ggml.pre name
//     llama.cpp accepts, mapped to its regex chain as llama.cpp maps it
//     (prefamilies.go; no name or "default" is llama.cpp's default chain),
//     the common patterns as hand-written scanners (pretokenize.go), the
//     rest on a small backtracking regex engine with look-ahead
//     (regex.go); CanonicalPre gives the name llama.cpp writes;
//   - special-token matching (control, user-defined and unknown tokens
//     written in the text are matched leftmost-longest, as HF matches its
//     added tokens; EncodeOptions.ParseSpecial=false takes control tokens
//     literally, while user-defined ones are matched in both modes, as HF
//     and llama.cpp match them);
//   - Decode and an incremental Stream that emits only whole characters.
//
// Goldens produced by HF tokenizers (encode with add_special_tokens=False,
// decode with skip_special_tokens=False) are the reference: see
// testdata/tokenizer.
//
// # Normalization
//
// HF normalizers are not stored in GGUF, so they follow from the
// vocabulary family: Qwen2 vocabularies (pre "qwen2", "deepseek-r1-qwen")
// are NFC normalized before pre-tokenization, as their tokenizer.json asks
// (llama.cpp skips it; other names with Qwen2's regex are not normalized,
// as in llama.cpp), and
// SentencePiece vocabularies turn spaces into ▁ and, with AddSpacePrefix,
// prepend one ▁ to every run of text between special tokens (HF's Prepend
// normalizer). Llama 3 and o200k vocabularies skip the merges for a
// pre-token that is itself a token (HF's ignore_merges).
//
// # Invalid UTF-8
//
// Encode accepts any bytes. Before tokenizing, each maximal invalid
// subsequence (the Unicode "maximal subpart" practice, as Python's
// bytes.decode(errors="replace") and Rust's String::from_utf8_lossy apply
// it) is replaced with U+FFFD, so Encode(s) is HF's encoding of the string
// a lossy decode of s gives. Raw bytes are never smuggled through byte
// tokens.
//
// Decode follows the same rule for token bytes that do not form valid
// UTF-8. For SentencePiece byte-fallback runs this differs from HF's
// ByteFallback decoder, which turns every byte of an invalid run into
// U+FFFD; valid text (anything Encode produced) decodes identically. The
// shared rule is what lets Stream's output always equal Decode's.
//
// Nothing in this package panics on user input: malformed vocabularies are
// errors from New, out-of-range ids are skipped by Decode and Stream.
package tokenizer
