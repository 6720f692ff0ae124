package tenant

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
