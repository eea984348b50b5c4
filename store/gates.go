package store

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Issue 13 (points 2 and 4): a link may be password protected (the record
// holds an argon2id hash, never the password) and may carry a social
// preview (title, description, image) shown to link unfurlers. Both are
// strings on Link, so Link stays comparable.

// ErrPasswordPermanent means a password was asked for a 301/308 link that
// had none: browsers may have cached its redirect forever, so a password
// added now would not stop them.
var ErrPasswordPermanent = errors.New("a permanent redirect cannot be given a password afterwards")

// ErrInvalidLinkGate means a password hash or preview is not in the form
// the store holds (PHC argon2id string; encoded preview within limits).
var ErrInvalidLinkGate = errors.New("invalid password hash or preview")

// Argon2id bounds a stored hash may name. They bound the work and memory a
// replica spends on one check, whatever a command carries.
const (
	PasswordMaxMemoryKiB = 256 << 10
	PasswordMaxTime      = 10
	PasswordMaxThreads   = 16
	passwordMinSalt      = 8
	passwordMaxSalt      = 64
	passwordMinKey       = 16
	passwordMaxKey       = 64
	maxPasswordHashLen   = 256
)

// PasswordHash is a parsed PHC string:
// $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<key> with unpadded
// standard base64.
type PasswordHash struct {
	MemoryKiB uint32
	Time      uint32
	Threads   uint8
	Salt, Key []byte
}

var phcB64 = base64.RawStdEncoding.Strict()

// String renders h as its PHC string.
func (h *PasswordHash) String() string {
	return fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$%s$%s", h.MemoryKiB, h.Time, h.Threads,
		phcB64.EncodeToString(h.Salt), phcB64.EncodeToString(h.Key))
}

// ParsePasswordHash parses a PHC argon2id string. It accepts only the form
// String writes (one hash, one encoding) within the bounds above.
func ParsePasswordHash(s string) (PasswordHash, error) {
	bad := func(why string) (PasswordHash, error) {
		return PasswordHash{}, fmt.Errorf("%w: password hash %s", ErrInvalidLinkGate, why)
	}
	if len(s) > maxPasswordHashLen {
		return bad("is too long")
	}
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v=19" {
		return bad("is not a PHC argon2id v=19 string")
	}
	var h PasswordHash
	params := strings.Split(parts[3], ",")
	if len(params) != 3 {
		return bad("does not name m, t and p")
	}
	m, okM := phcParam(params[0], "m=", PasswordMaxMemoryKiB)
	t, okT := phcParam(params[1], "t=", PasswordMaxTime)
	p, okP := phcParam(params[2], "p=", PasswordMaxThreads)
	if !okM || !okT || !okP || t < 1 || p < 1 || m < 8*p {
		return bad("has parameters out of range")
	}
	h.MemoryKiB, h.Time, h.Threads = uint32(m), uint32(t), uint8(p)
	var err error
	if h.Salt, err = phcB64.DecodeString(parts[4]); err != nil || len(h.Salt) < passwordMinSalt || len(h.Salt) > passwordMaxSalt {
		return bad("has a bad salt")
	}
	if h.Key, err = phcB64.DecodeString(parts[5]); err != nil || len(h.Key) < passwordMinKey || len(h.Key) > passwordMaxKey {
		return bad("has a bad key")
	}
	if h.String() != s {
		return bad("is not in canonical form")
	}
	return h, nil
}

// phcParam reads "name=<decimal>" up to max, without leading zeros.
func phcParam(s, name string, max uint64) (uint64, bool) {
	v, ok := strings.CutPrefix(s, name)
	if !ok || v == "" || (len(v) > 1 && v[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 32)
	return n, err == nil && n <= max
}

// CheckPasswordHash refuses a hash ParsePasswordHash would not read; ""
// (no password) is fine.
func CheckPasswordHash(s string) error {
	if s == "" {
		return nil
	}
	_, err := ParsePasswordHash(s)
	return err
}

// Preview limits, in bytes. Open Graph consumers cut titles near 60-90
// characters and descriptions near 200; these leave room for other
// scripts without letting a link carry a page of text.
const (
	MaxPreviewTitle       = 300
	MaxPreviewDescription = 1000
	MaxPreviewImage       = 2048
)

// Preview is a link's social preview. Link.Preview holds it encoded
// (EncodePreview): three length-prefixed strings, "" for no preview.
type Preview struct {
	Title       string `json:"title"`
	Description string `json:"description"`
	Image       string `json:"image"`
}

// IsZero reports whether p has nothing to show.
func (p Preview) IsZero() bool { return p == Preview{} }

// EncodePreview returns the Link.Preview form of p; "" for a zero p.
func EncodePreview(p Preview) string {
	if p.IsZero() {
		return ""
	}
	b := AppendString(nil, p.Title)
	b = AppendString(b, p.Description)
	b = AppendString(b, p.Image)
	return string(b)
}

// DecodePreview reads Link.Preview; "" is the zero Preview.
func DecodePreview(s string) (Preview, error) {
	if s == "" {
		return Preview{}, nil
	}
	r := NewFieldReader([]byte(s))
	p := Preview{Title: r.String(), Description: r.String(), Image: r.String()}
	if !r.Done() {
		return Preview{}, fmt.Errorf("%w: preview does not decode", ErrInvalidLinkGate)
	}
	if err := p.Check(); err != nil {
		return Preview{}, err
	}
	return p, nil
}

// Check refuses a preview the store does not hold (see Problem).
func (p Preview) Check() error {
	if why := p.Problem(); why != "" {
		return fmt.Errorf("%w: preview %s", ErrInvalidLinkGate, why)
	}
	return nil
}

// Problem says what is wrong with p, "" for nothing: empty, too long, not
// UTF-8, control characters, or an image that is not an absolute http(s)
// URL (the edge validates it fully, like a destination).
func (p Preview) Problem() string {
	if p.IsZero() {
		return "is empty"
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"title", p.Title, MaxPreviewTitle}, {"description", p.Description, MaxPreviewDescription}, {"image", p.Image, MaxPreviewImage}} {
		if len(f.v) > f.max {
			return fmt.Sprintf("%s is longer than %d bytes", f.name, f.max)
		}
		if !utf8.ValidString(f.v) {
			return f.name + " is not UTF-8"
		}
		for _, c := range f.v {
			if c < 0x20 || c == 0x7f {
				return f.name + " holds a control character"
			}
		}
	}
	if p.Image != "" && !strings.HasPrefix(p.Image, "https://") && !strings.HasPrefix(p.Image, "http://") {
		return "image is not an http(s) URL"
	}
	return ""
}

// CheckStoredPreview refuses an encoded preview DecodePreview would not
// read (or would read back differently); "" is fine.
func CheckStoredPreview(s string) error {
	if s == "" {
		return nil
	}
	p, err := DecodePreview(s)
	if err != nil {
		return err
	}
	if EncodePreview(p) != s {
		return fmt.Errorf("%w: preview is not in canonical form", ErrInvalidLinkGate)
	}
	return nil
}

// previewText shows an encoded preview in the audit history.
func previewText(s string) string {
	p, err := DecodePreview(s)
	if err != nil || p.IsZero() {
		return ""
	}
	return fmt.Sprintf("title=%q description=%q image=%q", p.Title, p.Description, p.Image)
}

// passwordText shows a password change in the audit history: never the
// hash, only whether there is one.
func passwordText(old, cur string) (string, string) {
	state := func(h string) string {
		if h == "" {
			return "none"
		}
		return "set"
	}
	if old != "" && cur != "" {
		return "set", "changed"
	}
	return state(old), state(cur)
}
