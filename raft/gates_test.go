package raft

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/waymark/waymark/store"
)

// gatesPHC is an argon2id PHC string written out by hand (salt 16 x 0x01,
// key 32 x 0x02).
const gatesPHC = "$argon2id$v=19$m=19456,t=2,p=1$AQEBAQEBAQEBAQEBAQEBAQ$AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI"

var gatesPreview = store.EncodePreview(store.Preview{Title: "T", Image: "https://i.example/x.png"})

func gatesCommands() []command {
	return []command{
		&createLinkCmd{Link: store.Link{Code: "pw", URL: "u", Owner: "o", Redirect: 302, PasswordHash: gatesPHC}},
		&createLinkCmd{Link: store.Link{Code: "go.acme.com/all", URL: "u", Owner: "o", Redirect: 307, NoForwardQuery: true, Tags: "sms",
			PasswordHash: gatesPHC, Preview: gatesPreview}, Idem: &store.IdempotencyWrite{Owner: "o", Key: "k", Record: store.Idempotency{Status: 201, Response: []byte("{}")}}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "pw", Owner: "o", SetPassword: true, PasswordHash: gatesPHC}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "pw", Owner: "o", SetPassword: true}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "pw", Owner: "o", SetTags: true, Tags: "a", SetPreview: true, Preview: gatesPreview}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "pw", Owner: "o", SetPreview: true}},
	}
}

func TestGatesCommandRoundTrip(t *testing.T) {
	for _, c := range gatesCommands() {
		h, got, err := decodeCommand(appendCommand(nil, c))
		if err != nil || h.version != 5 || !reflect.DeepEqual(got, c) {
			t.Errorf("round trip: got %+v (version %d), %v; want %+v", got, h.version, err, c)
		}
	}
}

// TestUpdateLinkVersion5Mask checks the uvarint mask against bytes written
// out by hand, and that version 4's one-byte mask still reads.
func TestUpdateLinkVersion5Mask(t *testing.T) {
	p := store.LinkPatch{Code: "a", SetPassword: true, SetPreview: true, Preview: gatesPreview}
	// type 2, version 5, flags 0, code "a", owner "", updated_at 0, mask
	// 1<<7|1<<8 = 384 = uvarint 0x80 0x03, password "", preview, audit.
	want := append([]byte{2, 5, 0, 1, 'a', 0, 0, 0x80, 0x03, 0}, store.AppendString(nil, gatesPreview)...)
	want = append(want, appendPatchAudit(nil, &p)...)
	if got := appendUpdateLink(nil, &p); !bytes.Equal(got, want) {
		t.Fatalf("version 5 bytes: %x; want %x", got, want)
	}
	// Version 4 wrote the same bytes with a one-byte mask for its bits.
	old := store.LinkPatch{Code: "a", Owner: "o", SetTags: true, Tags: "sms", SetStatus: true, Status: store.StatusDisabled}
	v4 := asVersion(appendUpdateLink(nil, &old), 4)
	if _, c, err := decodeCommand(v4); err != nil || !reflect.DeepEqual(c, &updateLinkCmd{Patch: old}) {
		t.Fatalf("version 4: %+v, %v", c, err)
	}
	for name, data := range map[string][]byte{
		"version 4 with the password bit":       append([]byte{2, 4, 0, 1, 'a', 0, 0, 0x80, 0}, appendPatchAudit(nil, &store.LinkPatch{})...),
		"version 5 with an unknown bit":         append([]byte{2, 5, 0, 1, 'a', 0, 0, 0x80, 0x04}, appendPatchAudit(nil, &store.LinkPatch{})...),
		"version 5 overlong mask":               append([]byte{2, 5, 0, 1, 'a', 0, 0, 0x81, 0x00}, appendPatchAudit(nil, &store.LinkPatch{})...),
		"version 5 plain-text password":         appendUpdateLink(nil, &store.LinkPatch{Code: "a", SetPassword: true, PasswordHash: "hunter2"}),
		"version 5 bad preview":                 appendUpdateLink(nil, &store.LinkPatch{Code: "a", SetPreview: true, Preview: "\x00\x00\x00"}),
		"create_link version 4 with a password": asVersion(appendCreateLink(nil, &store.Link{Code: "a", URL: "u", Redirect: 302, PasswordHash: gatesPHC}, nil), 4),
		"create_link with a plain password":     appendCreateLink(nil, &store.Link{Code: "a", URL: "u", Redirect: 302, PasswordHash: "hunter2"}, nil),
	} {
		if _, _, err := decodeCommand(data); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: got %v; want ErrCorrupt", name, err)
		}
	}
}

func TestGatesResultRoundTrip(t *testing.T) {
	l := store.Link{Code: "pw", URL: "u", Owner: "o", Redirect: 302, Index: 9, Tags: "a", PasswordHash: gatesPHC, Preview: gatesPreview}
	for _, want := range []*applyResult{
		{Index: 9, Link: l},
		{Index: 10, Err: fmt.Errorf("cannot update link %q: %w", "pw", store.ErrPasswordPermanent)},
		{Index: 11, Err: fmt.Errorf("cannot update link %q: %w", "pw", store.ErrInvalidLinkGate)},
	} {
		got, err := decodeResult(appendResult(nil, want))
		if err != nil || got.Link != want.Link {
			t.Fatalf("round trip: got %+v, %v; want %+v", got, err, want)
		}
		if want.Err != nil && (!errors.Is(got.Err, errors.Unwrap(want.Err)) || codeOf(want.Err) < 26) {
			t.Errorf("error %v: got %v (code %d)", want.Err, got.Err, codeOf(want.Err))
		}
	}
}

// TestGatesThroughAFollower writes a password link and edits it through a
// follower of a three-voter cluster: every replica stores the hash (never a
// password: the command holds only the hash), the forwarded answers carry
// it and the preview, and the FSM refuses a password on a 301 link.
func TestGatesThroughAFollower(t *testing.T) {
	c := newCluster(t, nil)
	_, _, follower := c.threeVoters()
	ctx := testCtx(t)
	n := follower.node()
	l := store.Link{Code: "gate01", URL: "https://a.example/", Owner: "o1", CreatedAt: 1, UpdatedAt: 1, Redirect: 302, PasswordHash: gatesPHC, Preview: gatesPreview}
	waitFor(t, "a create through the follower", func() (bool, string) {
		_, _, err := n.CreateLink(ctx, &l, nil)
		if errors.Is(err, store.ErrNoLeader) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		return true, ""
	})
	c.waitLinks("gate01")
	for _, m := range c.live() {
		got := mustGetLink(t, m.store(), "gate01")
		if got.PasswordHash != gatesPHC || got.Preview != gatesPreview {
			t.Errorf("%s stores %+v; want the hash and the preview", m.id, got)
		}
	}
	updated, err := n.UpdateLink(ctx, &store.LinkPatch{Code: "gate01", Owner: "o1", UpdatedAt: 2, SetTags: true, Tags: "a"})
	if err != nil || updated.PasswordHash != gatesPHC || updated.Preview != gatesPreview || updated.Tags != "a" {
		t.Fatalf("forwarded edit answered %+v, %v; want the link with its hash and preview", updated, err)
	}
	updated, err = n.UpdateLink(ctx, &store.LinkPatch{Code: "gate01", Owner: "o1", UpdatedAt: 3, SetPassword: true, SetPreview: true})
	if err != nil || updated.PasswordHash != "" || updated.Preview != "" {
		t.Fatalf("forwarded removal answered %+v, %v", updated, err)
	}

	perm := store.Link{Code: "gate02", URL: "https://a.example/", Owner: "o1", CreatedAt: 1, Redirect: 301}
	if _, _, err := n.CreateLink(ctx, &perm, nil); err != nil {
		t.Fatalf("create 301: %v", err)
	}
	_, err = n.UpdateLink(ctx, &store.LinkPatch{Code: "gate02", Owner: "o1", UpdatedAt: 2, SetPassword: true, PasswordHash: gatesPHC})
	if !errors.Is(err, store.ErrPasswordPermanent) {
		t.Fatalf("password on a 301 link through the follower: got %v; want ErrPasswordPermanent", err)
	}
}
