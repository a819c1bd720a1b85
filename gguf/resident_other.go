//go:build !linux

package gguf

// OpenResident maps the file as Open does: anonymous huge pages are a
// Linux feature.
func OpenResident(path string) (*File, error) { return Open(path) }
