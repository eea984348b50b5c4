package edge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/waymark/waymark/store"
)

// The secrets of shared dashboards: the token in the URL, the password
// hash, the unlock cookie. The token and the cookie come from outside, so
// their parsers are fuzzed (shares_fuzz_test.go).

// shareTokenText is the length of a token in a URL: 16 bytes in base64url
// without padding.
const shareTokenText = 22

var shareTokenEncoding = base64.RawURLEncoding.Strict()

// NewShareToken makes a share token: its URL text and its random bytes.
func NewShareToken() (string, [store.ShareTokenLen]byte, error) {
	var tok [store.ShareTokenLen]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return "", tok, fmt.Errorf("cannot make a share token: %w", err)
	}
	return shareTokenEncoding.EncodeToString(tok[:]), tok, nil
}

// ParseShareToken reads a token's URL text. Only the canonical text of
// each token is accepted (Strict: the unused low bits are zero), so one
// token has one URL.
func ParseShareToken(text string) ([store.ShareTokenLen]byte, bool) {
	var tok [store.ShareTokenLen]byte
	if len(text) != shareTokenText {
		return tok, false
	}
	n, err := shareTokenEncoding.Decode(tok[:], []byte(text))
	return tok, err == nil && n == len(tok)
}

// argon2id parameters: OWASP's minimum (19 MiB, two passes, one lane).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
	// Bounds on a stored hash's parameters, so a damaged record cannot
	// make one check take a gigabyte.
	argonMaxMemory = 256 * 1024
	argonMaxTime   = 10
)

var errBadPasswordHash = errors.New("not an argon2id hash")

// hashSharePassword encodes password as a PHC argon2id string.
func hashSharePassword(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("cannot make a salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// checkSharePassword reports whether password matches the encoded hash.
func checkSharePassword(encoded, password string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return false, errBadPasswordHash
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil ||
		m == 0 || m > argonMaxMemory || t == 0 || t > argonMaxTime || p == 0 {
		return false, errBadPasswordHash
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(want) < 16 || len(want) > 64 {
		return false, errBadPasswordHash
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// shareCookieMAC signs one share's unlock until expires (Unix seconds).
// The password hash is part of the message: it holds a random salt, so
// a cookie opens this share and no other, and no longer opens it once
// the share is gone.
func shareCookieMAC(key []byte, sh *store.Share, expires int64) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("waymark share unlock\x00"))
	m.Write([]byte(sh.ID))
	m.Write([]byte{0})
	m.Write([]byte(strconv.FormatInt(expires, 10)))
	m.Write([]byte{0})
	m.Write([]byte(sh.PasswordHash))
	return m.Sum(nil)
}

// shareCookieValue is "v1.<expires>.<mac in base64url>".
func shareCookieValue(key []byte, sh *store.Share, expires int64) string {
	return "v1." + strconv.FormatInt(expires, 10) + "." + base64.RawURLEncoding.EncodeToString(shareCookieMAC(key, sh, expires))
}

// parseShareCookie splits a cookie value into its expiry and MAC; it does
// not check them.
func parseShareCookie(v []byte) (expires int64, mac []byte, ok bool) {
	rest, found := strings.CutPrefix(string(v), "v1.")
	if !found || len(rest) > 80 {
		return 0, nil, false
	}
	exp, macText, found := strings.Cut(rest, ".")
	if !found || len(exp) == 0 || len(exp) > 12 {
		return 0, nil, false
	}
	for i := 0; i < len(exp); i++ {
		if exp[i] < '0' || exp[i] > '9' {
			return 0, nil, false
		}
	}
	expires, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return 0, nil, false
	}
	mac, err = base64.RawURLEncoding.Strict().DecodeString(macText)
	if err != nil || len(mac) != sha256.Size {
		return 0, nil, false
	}
	return expires, mac, true
}

// shareCookieValid reports whether v unlocks sh at now.
func shareCookieValid(key []byte, sh *store.Share, v []byte, now time.Time) bool {
	expires, mac, ok := parseShareCookie(v)
	if !ok || len(key) == 0 || expires <= now.Unix() || expires > now.Add(shareCookieTTL+time.Minute).Unix() {
		return false
	}
	return hmac.Equal(mac, shareCookieMAC(key, sh, expires))
}
