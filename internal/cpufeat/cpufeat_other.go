//go:build !amd64 || purego

package cpufeat

// AVX2 is false: no assembly on this architecture (or built with purego).
const AVX2 = false
