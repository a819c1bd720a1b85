// Package quantize converts a GGUF model's weights to other ggml types
// the way llama.cpp's llama-quantize does: the same mixes (Q4_K_M, Q6_K,
// Q8_0, …, Mixes), the same per-tensor choices, the same file.
//
// A Mix is a llama_ftype: a default type and rules (policy.go, after
// llama.cpp's llama_tensor_get_type) that single some tensors out. 1-D
// tensors, norms and the few small weights llama.cpp lists stay as they
// are. output.weight gets Q6_K (Q8_0 in Q8_0, and Q8_0 when its rows are
// not whole 256-blocks), and so does token_embd when there is no
// output.weight (tied embeddings); an untied token_embd keeps the mix's
// type. The _M mixes give attn_v (phi3's fused attn_qkv counts as one)
// and ffn_down Q6_K on the layers llama.cpp's use_more_bits picks (the
// first and last eighth, every third between); _S, _L, Q2_K and IQ4 mixes
// have rules of their own. A type whose block does not divide a tensor's
// row length falls back as llama.cpp's does (Q2_K and Q3_K to Q4_0, Q4_K
// to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, IQ4_XS to IQ4_NL; F16 when even
// that does not fit), and Choice.Fallback marks it. Counting attn_v and
// ffn_down layers follows llama.cpp's tensor order (llamaOrder), which
// is also the output's. Choose is the whole policy, a pure function.
//
// Run maps the input, plans (NewPlan: architecture llama, qwen2 or phi3,
// dense; codecs for every type; no requantization of quantized tensors
// unless allowed), then streams the output through gguf.Writer: metadata
// copied, general.quantization_version 2 and general.file_type set as
// llama.cpp sets them, each tensor converted in chunks of whole rows on
// Options.Threads goroutines and written in order, so the bytes do not
// depend on the thread count. Converted values are checked: a NaN or an
// infinity in, or a value that overflows the output type, is an error
// naming the tensor and row. The file is written as OUT.tmp and renamed
// once complete.
//
// Codecs come from package quant's registry (Format adds gguf's own Q8_0
// until quant has one); a mix that needs a type nobody encodes yet is
// refused up front, naming it. The package holds no block formats itself.
package quantize
