package tenant

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// MaxLen is the longest tenant name.
const MaxLen = 64

// Valid reports whether s may name a tenant.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// FromHeader resolves the tenant of a request from the values of its
// tenant header (nil: absent) the same way at every edge: no header is
// def; an empty value, a value Valid refuses and two headers are errors
// naming the header. An empty header is refused rather than taken as
// absent: it is what a client sends when the variable meant to fill it is
// unset, and its data would silently land in the default tenant. The
// error quotes at most the first 64 bytes of the value.
func FromHeader(vals []string, header, def string) (string, error) {
	switch len(vals) {
	case 0:
		return def, nil
	case 1:
	default:
		return "", fmt.Errorf("%d %s headers: send exactly one tenant", len(vals), header)
	}
	v := vals[0]
	if Valid(v) {
		return v, nil
	}
	if v == "" {
		return "", fmt.Errorf("empty %s header: name a tenant, or leave the header out for the default tenant", header)
	}
	q := strconv.Quote(v)
	if len(v) > MaxLen {
		q = fmt.Sprintf("%q... (%d bytes)", v[:MaxLen], len(v))
	}
	return "", fmt.Errorf("invalid tenant %s in header %s: a tenant must match [A-Za-z0-9._-]{1,%d}", q, header, MaxLen)
}

// Names remembers the tenants a process has seen and refuses a name that
// differs only in case from one it knows: "Acme" and "acme" are two
// tenants to the catalog and to S3, but one directory on a case-insensitive
// file system (macOS, Windows), where their files would mix. Names are
// otherwise kept exactly as sent, never folded, so a tenant is spelled the
// same at ingestion and at query time.
//
// With Max set, it also refuses a new name once Max names are known: a
// client naming its own tenants could otherwise make one lake directory,
// one Parquet file per checkpoint and a dozen /metrics series per name,
// without bound. Safe for concurrent use; set Max before the first call.
type Names struct {
	// Max is the most names Admit lets in (Seed ignores it); 0: no bound.
	Max    int
	mu     sync.RWMutex
	byFold map[string]string // lowercased name -> the spelling first seen
}

// Admit records name (which must be Valid) and reports whether it may be
// used. When it may not, known is the spelling seen first, or "" when the
// name is new and Max names are already known.
func (n *Names) Admit(name string) (known string, ok bool) {
	return n.admit(name, n.Max)
}

// Seed records a name that already exists (a tenant of the lake), however
// many are known, with Admit's answer otherwise.
func (n *Names) Seed(name string) (known string, ok bool) { return n.admit(name, 0) }

// Known reports whether name was admitted (spelled exactly so).
func (n *Names) Known(name string) bool {
	n.mu.RLock()
	known, seen := n.byFold[strings.ToLower(name)]
	n.mu.RUnlock()
	return seen && known == name
}

// Len is the number of names known.
func (n *Names) Len() int {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return len(n.byFold)
}

func (n *Names) admit(name string, max int) (known string, ok bool) {
	fold := strings.ToLower(name) // no allocation when already lowercase
	n.mu.RLock()
	known, seen := n.byFold[fold]
	n.mu.RUnlock()
	if seen {
		return known, known == name
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if known, seen := n.byFold[fold]; seen {
		return known, known == name
	}
	if max > 0 && len(n.byFold) >= max {
		return "", false
	}
	if n.byFold == nil {
		n.byFold = make(map[string]string)
	}
	// Own copies: name may alias a request buffer.
	name = strings.Clone(name)
	n.byFold[strings.ToLower(name)] = name
	return name, true
}
