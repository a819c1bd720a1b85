// Package model will own the architecture registry (llama, qwen2, mistral as
// llama, phi3): config from GGUF metadata, the tensor-name map, the RoPE
// style of each architecture, and the CPU reference forward pass that every
// device is checked against. Filled by the CPU reference model issue.
package model
