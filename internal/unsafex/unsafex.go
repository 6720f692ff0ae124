package unsafex

import "unsafe"

// String returns a string that shares b's memory. The string is valid only
// while b is neither modified nor reused; callers that keep it longer must
// copy it (strings.Clone).
func String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Bytes returns the bytes of s without copying. The result must never be
// modified: Go strings are immutable and may live in read-only memory.
func Bytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
