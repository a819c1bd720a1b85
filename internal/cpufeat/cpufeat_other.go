//go:build !amd64 || purego

package cpufeat

// No assembly on this architecture (or built with purego).
func detect() Level { return Go }

const hasVNNI = false
