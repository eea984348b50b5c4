package edge

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func (e *env) listCodes(key, query string) ([]string, *string) {
	e.t.Helper()
	r := e.do("GET", "/v1/links?"+query, key, "")
	e.expect(r, 200, "")
	var page struct {
		Links      []linkView `json:"links"`
		NextCursor *string    `json:"next_cursor"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		e.t.Fatalf("cannot decode %s: %v", r.body, err)
	}
	codes := []string{}
	for _, l := range page.Links {
		codes = append(codes, l.Code)
	}
	return codes, page.NextCursor
}

func TestTagsOnCreateAndPatch(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/a","tags":["Spring","sms","spring"]}`)
	if fmt.Sprint(v.Tags) != "[sms spring]" {
		t.Fatalf("created tags %v; want [sms spring] (lowered, deduplicated, sorted)", v.Tags)
	}
	plain := e.createLink(keyAlice, `{"url":"https://example.com/b"}`)
	if plain.Tags == nil || len(plain.Tags) != 0 {
		t.Fatalf("a link without tags shows %#v; want []", plain.Tags)
	}
	r := e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"tags":["q4"]}`)
	e.expect(r, 200, "")
	if !strings.Contains(string(r.body), `"tags":["q4"]`) {
		t.Fatalf("PATCH tags: %s", r.body)
	}
	for _, bad := range []string{
		`{"tags":"spring"}`, `{"tags":[1]}`, `{"tags":[""]}`, `{"tags":["` + strings.Repeat("a", 33) + `"]}`,
		`{"tags":["a b"]}`, `{"tags":["-a"]}`, `{"tags":["é"]}`, `{"tags":["a","b","c","d","e","f","g","h","i","j","k"]}`,
	} {
		e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, bad), 400, probInvalidRequest)
		e.expect(e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/c",`+bad[1:]), 400, probInvalidRequest)
	}
	if codes, _ := e.listCodes(keyAlice, "tag=q4"); !slices.Equal(codes, []string{v.Code}) {
		t.Fatalf("tag q4 after the refused edits: %v; want only %s", codes, v.Code)
	}
	e.expect(e.do("PATCH", "/v1/links/"+v.Code, keyAlice, `{"tags":[]}`), 200, "")
	if codes, _ := e.listCodes(keyAlice, "tag=q4"); len(codes) != 0 {
		t.Fatalf("tag q4 after clearing: %v; want none", codes)
	}
}

func TestListLinksFilters(t *testing.T) {
	e := newEnv(t, nil)
	// Oldest first: a, b, c, d; Bob's e has Alice's tag and URL words.
	a := e.createLink(keyAlice, `{"url":"https://shop.example/Spring-Sale","tags":["spring"]}`).Code
	b := e.createLink(keyAlice, `{"url":"https://shop.example/winter","tags":["winter"]}`).Code
	c := e.createLink(keyAlice, `{"url":"https://blog.example/x","alias":"spring-notes"}`).Code
	d := e.createLink(keyAlice, `{"url":"https://shop.example/spring-promo","tags":["spring","sms"]}`).Code
	e.createLink(keyBob, `{"url":"https://shop.example/spring","tags":["spring"]}`)
	host := strings.TrimPrefix(e.srv.publicBase, "http://")
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{d, c, b, a}},
		{"tag=spring", []string{d, a}},
		{"tag=SPRING", []string{d, a}},
		{"tag=sms", []string{d}},
		{"q=spring", []string{d, c, a}}, // URL any case, or the alias
		{"q=SHOP.EXAMPLE", []string{d, b, a}},
		{"q=spring&tag=winter", []string{}},
		{"q=sale&tag=spring", []string{a}},
		{"domain=" + url.QueryEscape(strings.ToUpper(host)), []string{d, c, b, a}},
		{"domain=go.elsewhere.example", []string{}},
	} {
		if got, _ := e.listCodes(keyAlice, tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("?%s: got %v; want %v", tc.query, got, tc.want)
		}
	}
	// Pages of one through the tag index, then through the q filter.
	for _, tc := range []struct {
		query string
		want  []string
	}{{"tag=spring", []string{d, a}}, {"q=shop", []string{d, b, a}}} {
		var got []string
		cursor := ""
		for range 10 {
			q := tc.query + "&limit=1"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			codes, next := e.listCodes(keyAlice, q)
			got = append(got, codes...)
			if next == nil {
				break
			}
			cursor = *next
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("?%s in pages of 1: got %v; want %v", tc.query, got, tc.want)
		}
	}
	for _, bad := range []string{"tag=", "tag=a%20b", "tag=a&tag=b", "q=", "q=" + strings.Repeat("x", 257), "domain=", "domain=a/b", "cursor=AAAA"} {
		e.expect(e.do("GET", "/v1/links?"+bad, keyAlice, ""), 400, probInvalidRequest)
	}
}
