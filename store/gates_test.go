package store

import (
	"bytes"
	"errors"
	"testing"
)

// samplePHC is an argon2id PHC string written out by hand: salt 16 bytes
// of 0x01, key 32 bytes of 0x02, unpadded standard base64.
const samplePHC = "$argon2id$v=19$m=19456,t=2,p=1$AQEBAQEBAQEBAQEBAQEBAQ$AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI"

func TestParsePasswordHash(t *testing.T) {
	h, err := ParsePasswordHash(samplePHC)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if h.MemoryKiB != 19456 || h.Time != 2 || h.Threads != 1 || !bytes.Equal(h.Salt, bytes.Repeat([]byte{1}, 16)) || !bytes.Equal(h.Key, bytes.Repeat([]byte{2}, 32)) {
		t.Fatalf("parse: got %+v", h)
	}
	if h.String() != samplePHC {
		t.Fatalf("String: got %q", h.String())
	}
	salt, key := "$AQEBAQEBAQEBAQEBAQEBAQ", "$AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI"
	for _, bad := range []string{
		"",
		"$argon2i$v=19$m=19456,t=2,p=1" + salt + key,
		"$argon2id$v=16$m=19456,t=2,p=1" + salt + key,
		"$argon2id$v=19$m=019456,t=2,p=1" + salt + key,
		"$argon2id$v=19$m=19456,t=0,p=1" + salt + key,
		"$argon2id$v=19$m=19456,t=11,p=1" + salt + key,
		"$argon2id$v=19$m=4,t=2,p=1" + salt + key,            // below 8 KiB per lane
		"$argon2id$v=19$m=262145,t=2,p=1" + salt + key,       // above 256 MiB
		"$argon2id$v=19$t=2,m=19456,p=1" + salt + key,        // order
		"$argon2id$v=19$m=19456,t=2,p=1" + salt + "==" + key, // padding
		"$argon2id$v=19$m=19456,t=2,p=1$AQEBAQ" + key,        // 4-byte salt
		"$argon2id$v=19$m=19456,t=2,p=1" + salt + "$AgICAgICAgI",
		"$argon2id$v=19$m=19456,t=2,p=1" + salt + key + "$",
	} {
		if _, err := ParsePasswordHash(bad); !errors.Is(err, ErrInvalidLinkGate) {
			t.Errorf("%q: got %v; want ErrInvalidLinkGate", bad, err)
		}
	}
}

func TestPreviewEncoding(t *testing.T) {
	p := Preview{Title: "T", Description: "", Image: "https://i.example/x"}
	enc := EncodePreview(p)
	want := "\x01T\x00\x13https://i.example/x"
	if enc != want {
		t.Fatalf("encode: got %q; want %q", enc, want)
	}
	if got, err := DecodePreview(enc); err != nil || got != p {
		t.Fatalf("decode: got %+v, %v", got, err)
	}
	if EncodePreview(Preview{}) != "" {
		t.Fatal("a zero preview must encode as empty")
	}
	for name, s := range map[string]string{
		"all empty":      "\x00\x00\x00",
		"trailing":       want + "x",
		"short":          "\x05T",
		"image not http": "\x00\x00\x0bftp://a.b/c",
		"control":        "\x03a\tb\x00\x00",
	} {
		if err := CheckStoredPreview(s); !errors.Is(err, ErrInvalidLinkGate) {
			t.Errorf("%s: got %v; want ErrInvalidLinkGate", name, err)
		}
	}
}

// TestLinkGatesEncoding checks the record's option bits 5 and 6 against
// bytes written out by hand.
func TestLinkGatesEncoding(t *testing.T) {
	l := Link{Code: "ab", URL: "u", Owner: "o", Status: StatusActive, Redirect: 302, Index: 5, Preview: "\x01T\x00\x00"}
	want := []byte{3, 2, 'a', 'b', 1, 'u', 1, 'o', 0, 0, 0, 0, 0, 0xae, 0x02, 5, linkOptPreview, 4, 1, 'T', 0, 0}
	if got := AppendLink(nil, &l); !bytes.Equal(got, want) {
		t.Fatalf("preview: got %x; want %x", got, want)
	}
	var back Link
	if err := DecodeLink(want, &back); err != nil || back != l {
		t.Fatalf("decode: got %+v, %v; want %+v", back, err, l)
	}
	l.PasswordHash, l.Tags = samplePHC, "sms"
	b := AppendLink(nil, &l)
	tail := AppendString(AppendString(AppendString(nil, "sms"), samplePHC), l.Preview)
	if b[16] != linkOptTags|linkOptPassword|linkOptPreview || !bytes.HasSuffix(b, tail) {
		t.Fatalf("tags, password, preview: got %x", b)
	}
	if err := DecodeLink(b, &back); err != nil || back != l {
		t.Fatalf("decode: got %+v, %v; want %+v", back, err, l)
	}
	for name, bad := range map[string][]byte{
		"empty password": {3, 2, 'a', 'b', 1, 'u', 1, 'o', 0, 0, 0, 0, 0, 0xae, 0x02, 5, linkOptPassword, 0},
		"bad password":   append([]byte{3, 2, 'a', 'b', 1, 'u', 1, 'o', 0, 0, 0, 0, 0, 0xae, 0x02, 5, linkOptPassword}, AppendString(nil, "$argon2id$x")...),
		"empty preview":  {3, 2, 'a', 'b', 1, 'u', 1, 'o', 0, 0, 0, 0, 0, 0xae, 0x02, 5, linkOptPreview, 0},
		"bad preview":    {3, 2, 'a', 'b', 1, 'u', 1, 'o', 0, 0, 0, 0, 0, 0xae, 0x02, 5, linkOptPreview, 3, 0, 0, 0},
	} {
		if err := DecodeLink(bad, &back); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v; want ErrCorrupt", name, err)
		}
	}
}

func TestPatchPassword(t *testing.T) {
	perm := Link{Code: "p", URL: "https://a.example/", Redirect: 301}
	p := LinkPatch{SetPassword: true, PasswordHash: samplePHC}
	if err := p.Apply(&perm); !errors.Is(err, ErrPasswordPermanent) || perm.PasswordHash != "" {
		t.Fatalf("password on a 301 link: got %v, hash %q; want ErrPasswordPermanent and no change", err, perm.PasswordHash)
	}
	l := Link{Code: "t", URL: "https://a.example/", Redirect: 302}
	if err := p.Apply(&l); err != nil || l.PasswordHash != samplePHC {
		t.Fatalf("password on a 302 link: %v, %q", err, l.PasswordHash)
	}
	bad := LinkPatch{SetPassword: true, PasswordHash: "plain text"}
	if err := bad.Apply(&l); !errors.Is(err, ErrInvalidLinkGate) || l.PasswordHash != samplePHC {
		t.Fatalf("a password that is no hash: got %v", err)
	}
	off := LinkPatch{SetPassword: true, SetPreview: true, Preview: "\x01T\x00\x00"}
	if err := off.Apply(&l); err != nil || l.PasswordHash != "" || l.Preview != "\x01T\x00\x00" {
		t.Fatalf("remove the password, set a preview: %v, %+v", err, l)
	}
	old := l
	old.PasswordHash = samplePHC
	h, ok := patchHistory(&off, &old, &l, 9)
	if !ok || h.Changes[0] != (FieldChange{Field: "password", Old: "set", New: "none"}) {
		t.Fatalf("history: got %+v", h.Changes)
	}
}
