package store

// CodeLen is the length of every generated code.
const CodeLen = 7

// IDSpace is the number of distinct generated codes: 62^7.
const IDSpace uint64 = 62 * 62 * 62 * 62 * 62 * 62 * 62

const base62Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// base62Value maps a byte to its digit value, or 0xff when it is not a digit.
var base62Value = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < len(base62Alphabet); i++ {
		t[base62Alphabet[i]] = byte(i)
	}
	return t
}()

// AppendCode appends the 7-character base62 form of id (< IDSpace) to dst.
func AppendCode(dst []byte, id uint64) []byte {
	var buf [CodeLen]byte
	for i := CodeLen - 1; i >= 0; i-- {
		buf[i] = base62Alphabet[id%62]
		id /= 62
	}
	return append(dst, buf[:]...)
}

// ParseCode returns the integer a 7-character base62 code stands for.
func ParseCode(code []byte) (uint64, error) {
	if len(code) != CodeLen {
		return 0, ErrBadCode
	}
	var id uint64
	for _, c := range code {
		v := base62Value[c]
		if v == 0xff {
			return 0, ErrBadCode
		}
		id = id*62 + uint64(v)
	}
	return id, nil
}
