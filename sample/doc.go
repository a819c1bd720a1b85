// Package sample owns the sampling parameters of a request, the CPU sampler
// that turns one sequence's logits into its next token, the counter-based
// random numbers that the CPU and GPU devices share, and stop-string matching
// over streamed text.
//
// Everything below is a specification: the CUDA sampler implements the same
// steps in the same order, so that a seed means the same thing on every
// device, under any load, alone or batched. A sequence's tokens depend only
// on its own logits, its own history, its parameters and its positions; no
// state is shared between sequences and nothing comes from a global random
// source.
//
// # Random numbers
//
// The generator is Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011), the counter-based generator
// of cuRAND and PyTorch. One uniform variate is derived from a 64-bit seed, a
// 64-bit position and a 32-bit stream number:
//
//	key     = { uint32(seed), uint32(seed >> 32) }
//	counter = { uint32(pos), uint32(pos >> 32), stream, 0 }
//	x       = Philox4x32-10(counter, key)
//	u       = float32(x[0] >> 8) * 2^-24          // in [0, 1), exact
//
// pos is the position of the token being drawn in its sequence (the prompt
// length plus the tokens generated before it), so a sequence's numbers do
// not depend on when, or beside what, it is sampled. The token draw uses
// stream 0; other streams are reserved for other draws at the same position
// (speculative-decoding acceptance, for instance), which then get numbers
// of their own. The remaining three output words are unused.
//
// # Sampling
//
// The sampler sees float32 logits z[0..n) for one sequence, where n is the
// vocabulary size. Its steps, in order:
//
//  1. Clean. NaN becomes -Inf, +Inf becomes MaxFloat32 (so that several +Inf
//     logits tie instead of producing Inf-Inf), -0 becomes +0 (so that the
//     order below is the order of float comparison).
//  2. Logit bias: z[t] += bias[t] (float32), then clean again.
//  3. Repetition penalty (llama.cpp): for every token t occurring in the last
//     RepeatLastN observed tokens (prompt and output), z[t] = z[t] / penalty
//     if z[t] > 0, else z[t] * penalty; applied once per token, whatever its
//     count. Then presence and frequency penalties (OpenAI) over generated
//     tokens only, c = number of times t was generated:
//     z[t] -= float32(float32(c)*frequency) + presence. Clean again. All
//     float32, with no fused multiply-add.
//  4. Order. Every later step sees candidates in one order: descending z,
//     ties broken by the lower token id. Tokens whose z is -Inf are never
//     candidates. If every z is -Inf, the result is the lowest id among the
//     largest raw logits (NaN counting as -Inf), or token 0 if every raw
//     logit is -Inf or NaN, with Logprob 0 and no Top. (Devices never
//     sample a row without one finite logit: they fail the entry with
//     ERROR NON_FINITE, ringbuf/PROTOCOL.md, so that a broken model ends
//     its requests with an error rather than token 0.)
//  5. Temperature == 0: the first token of the order (argmax, lowest id on
//     ties). No random number is used.
//  6. Temperature T > 0: every candidate gets a scaled logit and a weight,
//     in float64: x[t] = (float64(z[t]) - float64(zmax)) * (1/T), with 1/T
//     computed in float64, and w[t] = exp(x[t]). The first candidate has
//     x = 0 and w = 1 exactly. (The CPU's exp has a relative error below
//     2e-15 and returns 0 below 2^-1022; a device may use its own exp.)
//  7. Top-k (TopK > 0): keep the first TopK candidates of the order.
//  8. Top-p (TopP < 1): Z = sum of w over the candidates kept so far. Keep
//     the shortest prefix of the order whose running sum of w is >= TopP·Z:
//     the softmax p = w/Z compared with TopP, without dividing.
//  9. Min-p (MinP > 0): drop the candidates with x < ln(MinP), which is
//     p < MinP·p_max compared in log space.
//  10. Draw: S = sum of w over the kept candidates, u = Uniform(Seed, pos,
//     0). The token is the first kept candidate, in order, at which the
//     running sum of w exceeds float64(u)·S. Should rounding leave the sum
//     short of that after the last kept candidate, the last one with w > 0
//     is taken.
//
// Top-k, top-p and min-p each keep a prefix of the order, so together they
// keep the shortest of the three. Sums are float64; their summation order is
// unspecified (the CPU adds per-bucket subtotals, a GPU adds in parallel),
// so implementations agree except when a threshold or u·S falls within
// rounding error of a running sum, and then only on which of two adjacent
// candidates is taken.
//
// This is the order of vLLM and Hugging Face transformers (temperature
// before the filters). llama.cpp's default chain applies temperature after
// top-k, top-p and min-p, so its top-p and min-p see the T = 1
// distribution; the two coincide at T = 1.
//
// # Logprobs
//
// When Params.Logprobs is set, Result.Logprob is the log-softmax at
// temperature 1 of the logits after steps 1-3 (bias and penalties applied,
// nothing else): the model's distribution as adjusted by the request, not the
// truncated, temperature-scaled distribution the token was drawn from. It is
// the same number whatever temperature, top-k, top-p or min-p are, so it
// can be compared across requests and with a perplexity computation.
// Computing it costs one more exp pass over the vocabulary (none when T = 1
// and the draw already summed the weights), which is why it is only done on
// request; otherwise Logprob is 0. Result.Top holds the TopLogprobs first
// tokens of the order with their logprobs, tokens with z = -Inf excluded.
//
// # Stop strings
//
// StopMatcher applies stop strings to streamed text. Text is released as
// soon as it can no longer be the start of a stop string; the stream ends at
// the first stop string to complete (ties: the one that starts first), and
// the stop string itself is not released, as in the OpenAI API.
package sample
