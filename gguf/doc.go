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
// The writer produces GGUF v3 laid out as llama.cpp writes it, streaming
// tensor data so multi-gigabyte synthetic models are never held in memory.
//
// The package knows the ggml type table (block sizes and bytes per block)
// and typed access to the metadata llama.cpp defines (Hparams, Tokenizer).
// It does not know how to run a model or tokenize text.
package gguf
