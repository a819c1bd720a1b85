// Package null will be a device that completes steps instantly with
// deterministic tokens, for scheduler and ring benchmarks.
package null
