// Package bench will own the engine benchmark, the HTTP load generator,
// the latency profiler and reports. Figures measured so far are recorded in
// RESULTS.md beside this file.
package bench
