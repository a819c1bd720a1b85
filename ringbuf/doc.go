// Package ringbuf will own the pinned arena and the submit/completion rings
// inside it: the byte layout, and publish/consume with release/acquire
// ordering. The allocator is supplied by the device. Filled by the engine
// issue.
package ringbuf
