package sources

// ASCII case folding without allocation. Plausible lower-cases with
// String.downcase (Unicode); on ASCII input these agree byte for byte.
// Inputs with non-ASCII bytes take the strings.ToLower path where a map
// key is needed, and are compared byte-wise elsewhere (a non-ASCII letter
// whose lower case is ASCII, such as the Kelvin sign, is the one place the
// two can differ).

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// appendLower appends the ASCII lower case of s to dst. ok is false, and
// dst unchanged, when s has a non-ASCII byte.
func appendLower(dst []byte, s string) (out []byte, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return dst, false
		}
	}
	for i := 0; i < len(s); i++ {
		dst = append(dst, lowerByte(s[i]))
	}
	return dst, true
}

// equalFold reports whether the lower case of s is lower (itself lower case).
func equalFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if lowerByte(s[i]) != lower[i] {
			return false
		}
	}
	return true
}

// hasPrefixFold and hasSuffixFold compare s's ends with a lower-case affix.
func hasPrefixFold(s, lower string) bool {
	return len(s) >= len(lower) && equalFold(s[:len(lower)], lower)
}

func hasSuffixFold(s, lower string) bool {
	return len(s) >= len(lower) && equalFold(s[len(s)-len(lower):], lower)
}

// indexFold returns the first index at which the lower case of s contains
// lower, or -1.
func indexFold(s, lower string) int {
	for i := 0; i+len(lower) <= len(s); i++ {
		if equalFold(s[i:i+len(lower)], lower) {
			return i
		}
	}
	return -1
}

func containsFold(s, lower string) bool { return indexFold(s, lower) >= 0 }

// containsAnyFold reports whether s contains any of the lower-case words.
func containsAnyFold(s string, words []string) bool {
	for _, w := range words {
		if containsFold(s, w) {
			return true
		}
	}
	return false
}

// inFold reports whether the lower case of s is one of the lower-case words.
func inFold(s string, words []string) bool {
	for _, w := range words {
		if equalFold(s, w) {
			return true
		}
	}
	return false
}
