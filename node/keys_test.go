package node

import (
	"bytes"
	"errors"
	"testing"

	"github.com/waymark/waymark/store"
)

func TestKeyAnswerRoundTrip(t *testing.T) {
	h := store.HashAPIKey([]byte("wm_secret"))
	o := store.Owner{ID: "alice", Name: "Alice", CreatedAt: 5}
	k := store.APIKey{Hash: h, Owner: "alice", Name: "ci", Scopes: store.ScopeLinksRead, CreatedAt: 6, LastUsed: 60_000}
	b := appendKeyAnswer(nil, &o, &k)
	go2, gk, err := decodeKeyAnswer(b, h)
	if err != nil || go2 != o || gk.Scopes != k.Scopes || gk.Name != "ci" || gk.ID != store.KeyID(h) {
		t.Fatalf("round trip: %+v %+v %v", go2, gk, err)
	}
	// Another hash, another owner, trailing bytes: refused.
	if _, _, err := decodeKeyAnswer(b, store.HashAPIKey([]byte("other"))); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("answer for another hash: %v", err)
	}
	bob := store.Owner{ID: "bob", Name: "Bob"}
	if _, _, err := decodeKeyAnswer(appendKeyAnswer(nil, &bob, &k), h); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("answer with another owner: %v", err)
	}
	if _, _, err := decodeKeyAnswer(append(bytes.Clone(b), 0), h); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("trailing byte: %v", err)
	}
}

// FuzzDecodeKeyAnswer: the leader's answer never panics the decoder, and
// whatever decodes encodes back to the same bytes.
func FuzzDecodeKeyAnswer(f *testing.F) {
	h := store.HashAPIKey([]byte("wm_secret"))
	o := store.Owner{ID: "alice", Name: "Alice", CreatedAt: 5}
	f.Add(appendKeyAnswer(nil, &o, &store.APIKey{Hash: h, Owner: "alice", Name: "ci", Scopes: store.ScopeLinksRead}))
	f.Add(appendKeyAnswer(nil, &o, &store.APIKey{Hash: h, Owner: "alice", Name: "default", Scopes: store.AllScopes, LastUsed: 1}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, k, err := decodeKeyAnswer(b, h)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("got %v; want ErrCorrupt", err)
			}
			return
		}
		if again := appendKeyAnswer(nil, &o, &k); !bytes.Equal(again, b) {
			t.Fatalf("decode+encode gave %x; want %x", again, b)
		}
	})
}
