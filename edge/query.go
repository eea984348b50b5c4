package edge

import "bytes"

// Query forwarding (a link's forward_query, on by default as in Shlink):
// the visit's query string is merged into the destination's.
//
//   - The destination's parameters come first, in their order, except those
//     whose key the visit also sends: the visit's value wins a clash.
//   - Then every parameter of the visit, in its order (a key it repeats
//     stays repeated).
//   - The destination's fragment stays at the end.
//
// Keys compare byte for byte as sent (no percent-decoding), and empty
// parameters ("a=1&&b=2") are dropped. Nothing is re-encoded: what the
// visitor sent is what the destination gets.

// appendMergedQuery appends dest with the visit query q merged in. It
// allocates only when dst's capacity is too small.
func appendMergedQuery(dst, dest, q []byte) []byte {
	base, frag := dest, []byte(nil)
	if i := bytes.IndexByte(dest, '#'); i >= 0 {
		base, frag = dest[:i], dest[i:]
	}
	var dq []byte
	if i := bytes.IndexByte(base, '?'); i >= 0 {
		base, dq = base[:i], base[i+1:]
	}
	dst = append(dst, base...)
	sep := byte('?')
	for p := range params(dq) {
		if hasKey(q, queryKey(p)) {
			continue
		}
		dst = append(append(dst, sep), p...)
		sep = '&'
	}
	for p := range params(q) {
		dst = append(append(dst, sep), p...)
		sep = '&'
	}
	return append(dst, frag...)
}

// params yields the non-empty "&"-separated parameters of q.
func params(q []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(q) > 0 {
			p := q
			if i := bytes.IndexByte(q, '&'); i >= 0 {
				p, q = q[:i], q[i+1:]
			} else {
				q = nil
			}
			if len(p) > 0 && !yield(p) {
				return
			}
		}
	}
}

func queryKey(p []byte) []byte {
	if i := bytes.IndexByte(p, '='); i >= 0 {
		return p[:i]
	}
	return p
}

// hasKey reports whether query q has a parameter named key.
func hasKey(q, key []byte) bool {
	for p := range params(q) {
		if bytes.Equal(queryKey(p), key) {
			return true
		}
	}
	return false
}
