package signal

// Truncate forgets the keys interned after the first n, so that a decoder
// that fails half-way can leave the table as it found it.
func (t *KeyTable) Truncate(n int) {
	if n >= len(t.names) {
		return
	}
	for _, k := range t.names[n:] {
		delete(t.ids, k)
	}
	clear(t.names[n:]) // drop references so the strings can be collected
	t.names = t.names[:n]
	t.hashes = t.hashes[:n]
}
