package edge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/waymark/waymark/store"
)

// The secrets of shared dashboards: the token in the URL and the unlock
// cookie (the password hash is the links' argon2id, password.go). The token and the cookie come from outside, so
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
