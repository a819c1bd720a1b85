package sample

import (
	"bytes"
	"unicode/utf8"
)

// StopMatcher applies stop strings to text that arrives in pieces (one
// decoded token at a time). It releases text as soon as no stop string can
// begin in it, and ends the stream at the first stop string to complete,
// which does not depend on how the text was cut into pieces. Among stop
// strings completing at the same byte the one starting first wins. The stop
// string and anything after it are never released.
//
// It also holds back an incomplete UTF-8 sequence at the end of the text,
// since byte-level tokenizers split characters across tokens; released text
// is valid UTF-8 whenever the whole text is. Matching is bytewise.
type StopMatcher struct {
	stops   [][]byte
	maxLen  int
	pending []byte // text received but not released
	stopped bool
	matched string
}

// NewStopMatcher returns a matcher for stops; empty strings are ignored.
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, []byte(s))
			m.maxLen = max(m.maxLen, len(s))
		}
	}
	return m
}

// Push adds a piece of text and returns what can be released now. stopped
// reports that a stop string completed: emit is then the text before it,
// and every later Push returns "", true.
func (m *StopMatcher) Push(piece string) (emit string, stopped bool) {
	if m.stopped {
		return "", true
	}
	m.pending = append(m.pending, piece...)
	text := m.pending

	// Every earlier occurrence would have been found by an earlier Push, so
	// any occurrence here ends in the new piece. The first to end wins.
	end, start := -1, -1
	for _, s := range m.stops {
		i := bytes.Index(text, s)
		if i < 0 {
			continue
		}
		if e := i + len(s); end < 0 || e < end || (e == end && i < start) {
			end, start = e, i
			m.matched = string(s)
		}
	}
	if end >= 0 {
		emit = string(text[:start])
		m.pending = m.pending[:0]
		m.stopped = true
		return emit, true
	}

	// Hold back the longest suffix that begins some stop string; a later
	// occurrence can only start there.
	cut := len(text)
	for i := max(0, len(text)-m.maxLen+1); i < len(text); i++ {
		if m.couldStart(text[i:]) {
			cut = i
			break
		}
	}
	cut = min(cut, len(text)-partialRune(text))
	emit = string(text[:cut])
	m.pending = append(m.pending[:0], text[cut:]...)
	return emit, false
}

// couldStart reports whether b is a proper prefix of some stop string.
func (m *StopMatcher) couldStart(b []byte) bool {
	for _, s := range m.stops {
		if len(b) < len(s) && bytes.HasPrefix(s, b) {
			return true
		}
	}
	return false
}

// partialRune is the length of an incomplete UTF-8 sequence ending b: its
// leading byte and the continuation bytes that follow, when fewer than the
// leading byte announces. Invalid bytes count as complete.
func partialRune(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return 0
			}
			return len(b) - i
		}
	}
	return 0
}

// Flush ends the stream and returns the text still held back ("" after a
// stop).
func (m *StopMatcher) Flush() string {
	if m.stopped {
		return ""
	}
	s := string(m.pending)
	m.pending = m.pending[:0]
	return s
}

// Stopped reports whether a stop string has completed.
func (m *StopMatcher) Stopped() bool { return m.stopped }

// Matched is the stop string that ended the stream, or "".
func (m *StopMatcher) Matched() string { return m.matched }
