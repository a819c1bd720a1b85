// Package engine will own requests and sequences, the scheduler (continuous
// batching, chunked prefill, token budget), the paged KV block manager with
// its prefix cache, cancellation and token streaming. Filled by the engine
// issue.
package engine
