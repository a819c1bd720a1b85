// Package gguf reads and writes GGUF files, the model container of
// llama.cpp and Ollama.
//
// The reader maps a file read-only and parses its header (metadata,
// tensor infos) defensively: every count, length, dimension and offset is
// checked against named limits and against the bytes actually present
// before anything is allocated, so a malformed or hostile file yields an
// error naming the key or tensor and the byte offset, never a panic or a
// huge allocation. Tensor data is never copied: Data returns views into the
// mapping. GGUF v2 and v3, little-endian, are read; big-endian files are
// refused with ErrBigEndian.
//
// Open maps a file (syscall.Mmap) and Parse decodes the header from
// bytes already in memory (the built-in model). Nothing is allocated from
// an untrusted count before it is bounded twice: by a named limit (MaxKVs,
// MaxTensors, MaxStringLength, MaxArrayLength, MaxArrayDepth, MaxDims,
// MaxTensorName, MaxElements, MaxAlignment) and by the bytes left in the
// file divided by the smallest possible encoding of one element. Every
// error carries the byte offset and the key or tensor name, and wraps one
// of ErrBadMagic, ErrBigEndian, ErrVersion, ErrTruncated, ErrInvalid; a
// missing required metadata key wraps ErrMissingKey. Tensors must have 1–4
// non-zero dimensions whose product does not overflow, a known ggml type,
// a row length that is a whole number of blocks, an offset aligned to
// general.alignment (a power-of-two u32, default 32) and data inside the
// file; no two tensors may overlap, and no name or key may repeat.
// Metadata values decode into Go values (scalars as their Go type, arrays
// as typed slices, arrays of arrays as []Value); tensor shapes stay in
// ggml order (Dims[0] is the contiguous row length).
//
// The writer produces GGUF v3 laid out as llama.cpp writes it (metadata in
// insertion order, tensor infos, padding to the alignment, then each
// tensor's data padded to the alignment), streaming tensor data from a
// callback so multi-gigabyte synthetic models are never held in memory;
// WriteHeader writes only the header and returns the final file size.
//
// The package knows the ggml type table (block sizes and bytes per block)
// and typed access to the metadata llama.cpp defines (Hparams, Tokenizer).
// It does not know how to run a model or tokenize text.
package gguf
