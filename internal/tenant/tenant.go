package tenant

import (
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

// Names remembers the tenants a process has seen and refuses a name that
// differs only in case from one it knows: "Acme" and "acme" are two
// tenants to the catalog and to S3, but one directory on a case-insensitive
// file system (macOS, Windows), where their files would mix. Names are
// otherwise kept exactly as sent, never folded, so a tenant is spelled the
// same at ingestion and at query time. Safe for concurrent use.
type Names struct {
	mu     sync.RWMutex
	byFold map[string]string // lowercased name -> the spelling first seen
}

// Admit records name (which must be Valid) and reports whether it may be
// used; when it may not, known is the spelling that was seen first.
func (n *Names) Admit(name string) (known string, ok bool) {
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
	if n.byFold == nil {
		n.byFold = make(map[string]string)
	}
	// Own copies: name may alias a request buffer.
	name = strings.Clone(name)
	n.byFold[strings.ToLower(name)] = name
	return name, true
}
