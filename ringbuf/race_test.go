//go:build race

package ringbuf

const raceEnabled = true
