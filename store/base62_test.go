package store

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestIDSpaceIs62To7(t *testing.T) {
	want := uint64(1)
	for range CodeLen {
		want *= 62
	}
	if IDSpace != want || IDSpace != 3_521_614_606_208 {
		t.Fatalf("IDSpace = %d; want %d", IDSpace, want)
	}
}

func TestCodeBoundaries(t *testing.T) {
	for _, tc := range []struct {
		id   uint64
		code string
	}{
		{0, "0000000"},
		{1, "0000001"},
		{61, "000000z"},
		{62, "0000010"},
		{IDSpace - 1, "zzzzzzz"},
	} {
		got := string(AppendCode(nil, tc.id))
		if got != tc.code {
			t.Errorf("AppendCode(%d) = %q; want %q", tc.id, got, tc.code)
		}
		id, err := ParseCode([]byte(tc.code))
		if err != nil || id != tc.id {
			t.Errorf("ParseCode(%q) = %d, %v; want %d, nil", tc.code, id, err, tc.id)
		}
	}
}

func TestCodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 0, CodeLen)
	for i := range 200_000 {
		var id uint64
		switch {
		case i < 1000:
			id = uint64(i)
		case i < 2000:
			id = IDSpace - 1 - uint64(i-1000)
		default:
			id = rng.Uint64N(IDSpace)
		}
		buf = AppendCode(buf[:0], id)
		if len(buf) != CodeLen {
			t.Fatalf("AppendCode(%d) has %d characters; want %d", id, len(buf), CodeLen)
		}
		for _, c := range buf {
			if !strings.ContainsRune(base62Alphabet, rune(c)) {
				t.Fatalf("AppendCode(%d) = %q: %q is not in the alphabet", id, buf, c)
			}
		}
		got, err := ParseCode(buf)
		if err != nil || got != id {
			t.Fatalf("ParseCode(AppendCode(%d)) = %d, %v; want %d, nil", id, got, err, id)
		}
	}
}

func TestAppendCodeKeepsPrefix(t *testing.T) {
	got := string(AppendCode([]byte("x/"), 62))
	if got != "x/0000010" {
		t.Fatalf("AppendCode with prefix = %q; want %q", got, "x/0000010")
	}
}

func TestParseCodeRejects(t *testing.T) {
	for _, code := range []string{
		"",
		"abc",
		"000000",   // 6
		"00000000", // 8
		"000000-",
		"000 000",
		"0000_00",
		"+000000",
		"00000\x00",
		"000000\xff",
		"ééééééé"[:7],
	} {
		if id, err := ParseCode([]byte(code)); !errors.Is(err, ErrBadCode) {
			t.Errorf("ParseCode(%q) = %d, %v; want ErrBadCode", code, id, err)
		}
	}
}

func FuzzParseCode(f *testing.F) {
	for _, s := range []string{"0000000", "zzzzzzz", "aB3xY9q", "", "abc", "0000000x", "abc-def", "\xff\xff\xff\xff\xff\xff\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		id, err := ParseCode(code)
		if err != nil {
			if !errors.Is(err, ErrBadCode) {
				t.Fatalf("ParseCode(%q) error %v; want ErrBadCode", code, err)
			}
			return
		}
		if id >= IDSpace {
			t.Fatalf("ParseCode(%q) = %d; want < IDSpace", code, id)
		}
		if got := AppendCode(nil, id); string(got) != string(code) {
			t.Fatalf("AppendCode(ParseCode(%q)) = %q", code, got)
		}
	})
}
