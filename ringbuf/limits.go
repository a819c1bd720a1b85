package ringbuf

// Device limits: what every device takes at most. The CUDA kernel sizes
// its per-slot arrays and its attention by them, and the Go executor
// refuses the same payloads, so the engine checks a request against them
// at Submit (and the CUDA device a model at open) rather than letting a
// record fail in the ring.
const (
	// MaxStop is the most stop-token ids one slot holds (an OPEN_SLOT's
	// n_stop); more are refused with CodeBadParams at SPOffNStop.
	MaxStop = 256
	// MaxBias is the most logit-bias pairs one slot holds (an OPEN_SLOT's
	// n_bias); more are refused with CodeBadParams at SPOffNBias. It is
	// also what the HTTP API accepts in logit_bias.
	MaxBias = 1024
	// MaxHeadDim is the largest attention head dimension of a model the
	// CUDA device opens: its attention gives each of a warp's 32 lanes
	// four dimensions of a head.
	MaxHeadDim = 128
)
