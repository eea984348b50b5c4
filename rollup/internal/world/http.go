package world

import (
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/store"
)

// Auth is an api.Authorizer over fixed tables: two owners (API keys
// "key-a" and "key-b"), each with one link and one site; owner-a has the
// world's link Code and Site (domain ny.example, zone TZ).
type Auth struct{}

func (Auth) Owner(key []byte) (string, bool) {
	switch string(key) {
	case "key-a":
		return "owner-a", true
	case "key-b":
		return "owner-b", true
	}
	return "", false
}

func (Auth) Link(code string) (store.Link, bool) {
	switch code {
	case Code:
		return store.Link{Code: code, Owner: "owner-a"}, true
	case "bcode01":
		return store.Link{Code: code, Owner: "owner-b"}, true
	}
	return store.Link{}, false
}

func (Auth) Site(id string) (store.Site, bool) {
	switch id {
	case Site:
		return store.Site{ID: id, Domain: "ny.example", Timezone: TZ, Owner: "owner-a"}, true
	case "site-b":
		return store.Site{ID: id, Domain: "b.example", Timezone: "UTC", Owner: "owner-b"}, true
	}
	return store.Site{}, false
}

func (a Auth) SiteByDomain(domain string) (store.Site, bool) {
	switch domain {
	case "ny.example":
		return a.Site(Site)
	case "b.example":
		return a.Site("site-b")
	}
	return store.Site{}, false
}

// Call sends one request with an API key ("" for none) and returns the
// status, Content-Type and body.
func Call(t testing.TB, method, url, key, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), data
}

// SegmentRef reads the identity from the header of a segment made by
// SegmentBytes (node ids shorter than 128 bytes).
func SegmentRef(seg []byte) ingest.SegmentRef {
	n := int(seg[21])
	return ingest.SegmentRef{Node: string(seg[22 : 22+n]), Seq: binary.BigEndian.Uint64(seg[5:])}
}

// EncodeBatch is the shipper's encoding: ingest.AppendBatch under zstd.
func EncodeBatch(t testing.TB, bs []ingest.BatchSegment) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatalf("zstd: %v", err)
	}
	defer enc.Close()
	return enc.EncodeAll(ingest.AppendBatch(nil, bs), nil)
}

// Serve serves h on a fresh loopback port until the test ends and
// returns its base URL.
func Serve(t testing.TB, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := &fasthttp.Server{Handler: h, MaxRequestBodySize: 64 << 20}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}
