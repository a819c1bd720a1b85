// Package sample will own sampling parameters, the CPU sampler and the
// counter-based RNG keyed by (seed, position) that the CPU and GPU devices
// share. Filled by the CPU reference model issue.
package sample
