package signal

import "github.com/cespare/xxhash/v2"

// KeyID identifies an interned attribute key within one KeyTable.
type KeyID uint32

// KeyTable interns attribute keys. Lookups with a []byte key do not allocate
// (the compiler elides the conversion in a map index expression); only the
// first sight of a key copies it.
type KeyTable struct {
	names  []string
	hashes []uint64 // xxhash of each name, for series ids
	ids    map[string]KeyID
}

// maxRetainedKeys bounds how many keys Reset keeps as a cache across batches,
// so that a stream of ever-new keys cannot grow the table without limit.
const maxRetainedKeys = 1 << 16

// ID returns the id of key, interning it on first sight.
func (t *KeyTable) ID(key []byte) KeyID {
	if id, ok := t.ids[string(key)]; ok {
		return id
	}
	return t.add(string(key))
}

// IDString is ID for a key already held as a string.
func (t *KeyTable) IDString(key string) KeyID {
	if id, ok := t.ids[key]; ok {
		return id
	}
	return t.add(key)
}

func (t *KeyTable) add(key string) KeyID {
	if t.ids == nil {
		t.ids = make(map[string]KeyID, 256)
	}
	id := KeyID(len(t.names))
	t.names = append(t.names, key)
	t.hashes = append(t.hashes, xxhash.Sum64String(key))
	t.ids[key] = id
	return id
}

// Hash returns the xxhash64 of the key for id.
func (t *KeyTable) Hash(id KeyID) uint64 { return t.hashes[id] }

// Name returns the key for id.
func (t *KeyTable) Name(id KeyID) string { return t.names[id] }

// Len is the number of interned keys.
func (t *KeyTable) Len() int { return len(t.names) }

// reset forgets the keys only when the table has grown past its bound; a
// bounded table is kept because the same keys recur batch after batch.
func (t *KeyTable) reset() {
	if len(t.names) > maxRetainedKeys {
		t.names = t.names[:0]
		t.hashes = t.hashes[:0]
		clear(t.ids)
	}
}
