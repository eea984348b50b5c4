package raft

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/waymark/waymark/store"
)

func sampleCommands() []command {
	idem := &store.IdempotencyWrite{Owner: "o1", Key: "k-1", Record: store.Idempotency{
		RequestHash: [32]byte{1, 2, 3}, Status: 201, Response: []byte(`{"code":"abc"}`), CreatedAt: 1700000000000,
	}}
	return []command{
		&createLinksBulkCmd{Items: []store.BulkItem{
			{Link: *testLink("bulk-1"), ExternalID: "bitly:bit.ly/x"},
			{Link: store.Link{Code: "b2", URL: "https://b", Owner: "o1", Status: store.StatusActive, Redirect: 301, NoForwardQuery: true}},
			{Link: store.Link{Code: "go.acme.com/b3", URL: "https://b", Owner: "o1", Redirect: 302, Tags: "sms,spring"}, ExternalID: "e3"},
		}},
		&createLinkCmd{Link: *testLink("abc1234")},
		&createLinkCmd{Link: store.Link{Code: "x", URL: "u", Owner: "o", ExpiresAt: -5, ClickLimit: 9, Status: store.StatusReview, Redirect: 308}, Idem: idem},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", Owner: "o1", UpdatedAt: 7}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", SetURL: true, URL: "https://b", SetExpiresAt: true, ExpiresAt: 99,
			SetClickLimit: true, ClickLimit: 3, SetStatus: true, Status: store.StatusLegalBlock}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", UpdatedAt: 9, SetStatus: true, Status: store.StatusActive,
			OnlyFrom: store.OperatorStatuses, ClearReview: true, Actor: store.ActorOperator, Action: "restore", Reason: "false positive"}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", Owner: "o1", SetURL: true, URL: "https://c", ReviewUntil: 86_400_000}},
		&createLinkCmd{Link: store.Link{Code: "noq", URL: "u", Owner: "o", Redirect: 302, NoForwardQuery: true}, Idem: idem},
		&createLinkCmd{Link: store.Link{Code: "noq2", URL: "u", Owner: "o", Redirect: 302, NoForwardQuery: true}},
		&createLinkCmd{Link: store.Link{Code: "go.acme.com/launch", URL: "u", Owner: "o", Redirect: 302}, Idem: idem},
		&createLinkCmd{Link: store.Link{Code: "go.acme.com/abc1234", URL: "u", Owner: "o", Redirect: 302, NoForwardQuery: true}},
		&domainUpdateCmd{Change: store.DomainChange{Op: store.DomainRegister, Name: "go.acme.com", Owner: "o1", At: 5}},
		&domainUpdateCmd{Change: store.DomainChange{Op: store.DomainAdd, Name: "xn--bcher-kva.example", Owner: "o1", At: 6}},
		&domainUpdateCmd{Change: store.DomainChange{Op: store.DomainApprove, Name: "go.acme.com", At: 7}},
		&domainUpdateCmd{Change: store.DomainChange{Op: store.DomainDelete, Name: "go.acme.com", At: 8}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", Owner: "o1", SetForwardQuery: true, NoForwardQuery: true}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", Owner: "o1", SetForwardQuery: true}},
		&createLinkCmd{Link: store.Link{Code: "tag", URL: "u", Owner: "o", Redirect: 302, Tags: "sms,spring"}, Idem: idem},
		&createLinkCmd{Link: store.Link{Code: "tag2", URL: "u", Owner: "o", Redirect: 302, NoForwardQuery: true, Tags: "a"}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", Owner: "o1", SetTags: true, Tags: "q4,sms"}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", Owner: "o1", SetTags: true}},
		// Issue 13: redirect rules (create_link and update_link version 5).
		&createLinkCmd{Link: store.Link{Code: "rul", URL: "u", Owner: "o", Redirect: 302, Tags: "a", Rules: testRules}, Idem: idem},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", Owner: "o1", SetTags: true, Tags: "b", SetRules: true, Rules: testRules, ReviewUntil: 5}},
		&updateLinkCmd{Patch: store.LinkPatch{Code: "abc1234", Owner: "o1", SetRules: true}},
		&createOwnerCmd{Owner: store.Owner{ID: "o1", Name: "Ada", CreatedAt: 5}, Key: store.HashAPIKey([]byte("secret"))},
		&createSiteCmd{Site: store.Site{ID: "s1", Domain: "example.com", Timezone: "Europe/Paris", Owner: "o1", CreatedAt: 6}},
		&allocBlockCmd{Region: "eu", Size: 4096, version: 2},
		&claimRegionCmd{Region: "eu-west"},
		&expireIdempotencyCmd{Cutoff: 1700000000000, Limit: maxExpirePerEntry},
		&expireIdempotencyCmd{Cutoff: -5, Limit: 1},
		&setSecretCmd{Key: []byte("0123456789abcdef")},
		&setClusterIDCmd{ID: "0f1e2d3c4b5a69788796a5b4c3d2e1f0"},
		&updateSiteCmd{Patch: store.SitePatch{SiteID: "s1", Owner: "o1", SetTimezone: true, Timezone: "Asia/Tokyo", SetIgnoreDNT: true, IgnoreDNT: true}},
		&updateSiteCmd{Patch: store.SitePatch{SiteID: "s1", SetIgnoreDNT: true}},
		&updateSiteCmd{Patch: store.SitePatch{SiteID: "s1", Owner: "o1", AddGoal: &store.Goal{ID: "g1", PagePath: "/blog/**", DisplayName: "Visit /blog/**"}}},
		&updateSiteCmd{Patch: store.SitePatch{SiteID: "s1", Owner: "o1", DeleteGoal: "g1",
			AddGoal: &store.Goal{ID: "g2", EventName: "Signup", DisplayName: "New customers"}}},
		&fileReportCmd{Filing: store.ReportFiling{Code: "abc1234", Reasons: store.ReasonPhishing, Count: 1, FirstAt: 5, LastAt: 5}},
		&fileReportCmd{Filing: store.ReportFiling{Code: "abc1234", Reasons: store.ReasonSpam | store.ReasonOther, Count: 40, FirstAt: -5, LastAt: 9000,
			Details: []string{"fake bank login", "x"}}},
		&resolveReportCmd{Res: store.ReportResolution{ID: 7, Action: store.ReportBlock, Reason: "phishing kit", Actor: "ops", At: 99}},
		&resolveReportCmd{Res: store.ReportResolution{ID: 8, Action: store.ReportDismiss}},
		&blocklistUpdateCmd{Changes: []store.BlockChange{
			{Entry: store.BlockEntry{Value: "evil.example", Kind: store.BlockKindBlock, Reason: "phishing", AddedAt: 1764590000000}},
			{Entry: store.BlockEntry{Value: "10.0.0.0/8", Kind: store.BlockKindShortener}},
			{Remove: true, Entry: store.BlockEntry{Value: "2001:db8::bad"}},
		}},
		&setOwnerSuspendedCmd{Owner: "o1", Suspended: true, At: 1700000000000, Reason: "phishing"},
		&setOwnerSuspendedCmd{Owner: "o1", At: -1},
		&purgeDeletedLinksCmd{Cutoff: 1700000000000, At: 1700000000001, Codes: []string{"abc1234", "my-alias"}},
		// Issue 12: API keys (keyscmd.go).
		&createKeyCmd{Key: store.APIKey{Owner: "o1", Name: "ci deploy", Scopes: store.ScopeLinksRead | store.ScopeStatsRead, CreatedAt: 1700000000000, Hash: store.HashAPIKey([]byte("s1"))}},
		&createKeyCmd{Key: store.APIKey{Owner: "o1", Name: "all", Scopes: store.AllScopes, CreatedAt: -1, Hash: store.HashAPIKey([]byte("s2"))}},
		&revokeKeyCmd{Owner: "o1", ID: "0123456789abcdef"},
		&revokeKeyCmd{ID: "fedcba9876543210"},
		&touchKeysCmd{Touches: []store.KeyTouch{{Hash: store.HashAPIKey([]byte("s1")), At: 1700000040000}, {Hash: store.HashAPIKey([]byte("s2"))}}},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		data := appendCommand(nil, c)
		h, got, err := decodeCommand(data)
		if err != nil {
			t.Fatalf("%T: decode: %v", c, err)
		}
		if h.typ != c.kind() || h.version != commandTable[c.kind()].version || h.skippable() {
			t.Errorf("%T: got header %+v; want type %d version 1 not skippable", c, h, c.kind())
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%T: got %+v; want %+v", c, got, c)
		}
	}
}

func TestAppendEncodersMatchCommands(t *testing.T) {
	l := testLink("abc1234")
	if got, want := appendCreateLink(nil, l, nil), appendCommand(nil, &createLinkCmd{Link: *l}); string(got) != string(want) {
		t.Errorf("appendCreateLink: got %x; want %x", got, want)
	}
	prefix := []byte("xy")
	got := appendAllocBlock(prefix, "us", 16)
	if string(got[:2]) != "xy" {
		t.Errorf("appendAllocBlock dropped dst: got %q", got)
	}
	if _, c, err := decodeCommand(got[2:]); err != nil || !reflect.DeepEqual(c, &allocBlockCmd{Region: "us", Size: 16, version: 2}) {
		t.Errorf("decode alloc block: got %+v, %v", c, err)
	}
}

func TestDecodeCommandRejects(t *testing.T) {
	good := appendCreateLink(nil, testLink("abc1234"), nil)
	badStatus := appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", Status: 77, Redirect: 302}})
	badRedirect := appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", Redirect: 200}})
	badPatch := updateLinkV1(&store.LinkPatch{Code: "a"})
	badPatch[len(badPatch)-1] = 0x80 // the field mask is the last byte of an empty version 1 patch
	badAuditFlag := appendUpdateLink(nil, &store.LinkPatch{Code: "a"})
	badAuditFlag[len(badAuditFlag)-3] = 0x02 // flags, then only_from and review_until (one byte each when zero)
	site := func(p store.SitePatch) []byte { return appendCommand(nil, &updateSiteCmd{Patch: p}) }
	dnt := site(store.SitePatch{SiteID: "s1", SetIgnoreDNT: true})
	dntTwo := append(bytes.Clone(dnt[:len(dnt)-1]), 2) // the flag is the last byte
	siteMask := append(bytes.Clone(dnt[:len(dnt)-2]), 0x10|sitePatchIgnoreDNT, 0)
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, store.ErrCorrupt},
		{"header only short", []byte{1, 1}, store.ErrCorrupt},
		{"truncated", good[:len(good)-1], store.ErrCorrupt},
		{"trailing", append(append([]byte(nil), good...), 0), store.ErrCorrupt},
		{"bad status", badStatus, store.ErrCorrupt},
		{"bad redirect", badRedirect, store.ErrCorrupt},
		{"empty code", appendCommand(nil, &createLinkCmd{Link: store.Link{Redirect: 302}}), store.ErrCorrupt},
		{"short secret", appendCommand(nil, &setSecretCmd{Key: []byte("short")}), store.ErrCorrupt},
		{"zero block", appendCommand(nil, &allocBlockCmd{Region: "us"}), store.ErrCorrupt},
		{"empty region claim", appendClaimRegion(nil, ""), store.ErrCorrupt},
		{"region claim with a space", appendClaimRegion(nil, "eu west"), store.ErrCorrupt},
		{"region claim too long", appendClaimRegion(nil, strings.Repeat("r", store.MaxRegionNameLen+1)), store.ErrCorrupt},
		{"expiry without a limit", appendExpireIdempotency(nil, 1, 0), store.ErrCorrupt},
		{"expiry over the limit", appendExpireIdempotency(nil, 1, maxExpirePerEntry+1), store.ErrCorrupt},
		{"unknown patch bits", badPatch, store.ErrCorrupt},
		{"unknown audit flag", badAuditFlag, store.ErrCorrupt},
		{"reason too long", appendUpdateLink(nil, &store.LinkPatch{Code: "a", Reason: strings.Repeat("r", store.MaxReasonLen+1)}), store.ErrCorrupt},
		{"actor too long", appendUpdateLink(nil, &store.LinkPatch{Code: "a", Actor: strings.Repeat("a", store.MaxActorLen+1)}), store.ErrCorrupt},
		{"update_link newer version", []byte{byte(cmdUpdateLink), commandTable[cmdUpdateLink].version + 1, 0}, errUnknownCommand},
		{"site edit that changes nothing", site(store.SitePatch{SiteID: "s1", Owner: "o1"}), store.ErrCorrupt},
		{"site edit without a site", site(store.SitePatch{SetIgnoreDNT: true}), store.ErrCorrupt},
		{"ignore DNT flag 2", dntTwo, store.ErrCorrupt},
		{"unknown site patch bits", siteMask, store.ErrCorrupt},
		{"empty time zone", site(store.SitePatch{SiteID: "s1", SetTimezone: true}), store.ErrCorrupt},
		{"goal with both kinds", site(store.SitePatch{SiteID: "s1", AddGoal: &store.Goal{ID: "g", EventName: "E", PagePath: "/p", DisplayName: "E"}}), store.ErrCorrupt},
		{"goal without display name", site(store.SitePatch{SiteID: "s1", AddGoal: &store.Goal{ID: "g", EventName: "E"}}), store.ErrCorrupt},
		{"reserved goal", site(store.SitePatch{SiteID: "s1", AddGoal: &store.Goal{ID: "g", EventName: "engagement", DisplayName: "e"}}), store.ErrCorrupt},
		{"untrimmed goal", site(store.SitePatch{SiteID: "s1", AddGoal: &store.Goal{ID: "g", PagePath: "/p ", DisplayName: "p"}}), store.ErrCorrupt},
		{"goal id with a slash", site(store.SitePatch{SiteID: "s1", DeleteGoal: "a/b"}), store.ErrCorrupt},
		{"owner with NUL", appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", Owner: "a\x00b", Redirect: 302}}), store.ErrCorrupt},
		{"idempotency owner with NUL", appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", Owner: "a", Redirect: 302}, Idem: &store.IdempotencyWrite{Owner: "a\x00", Key: "k"}}), store.ErrCorrupt},
		{"patch owner with NUL", appendCommand(nil, &updateLinkCmd{Patch: store.LinkPatch{Code: "a", Owner: "\x00"}}), store.ErrCorrupt},
		{"owner id with NUL", appendCommand(nil, &createOwnerCmd{Owner: store.Owner{ID: "o\x00"}}), store.ErrCorrupt},
		{"site owner with NUL", appendCommand(nil, &createSiteCmd{Site: store.Site{ID: "s", Domain: "d", Owner: "o\x00"}}), store.ErrCorrupt},
		{"empty cluster id", appendCommand(nil, &setClusterIDCmd{}), store.ErrCorrupt},
		{"cluster id with upper case", appendCommand(nil, &setClusterIDCmd{ID: "ABC"}), store.ErrCorrupt},
		{"report without reason", appendCommand(nil, &fileReportCmd{Filing: store.ReportFiling{Code: "a", Count: 1}}), store.ErrCorrupt},
		{"report with unknown reason", appendCommand(nil, &fileReportCmd{Filing: store.ReportFiling{Code: "a", Reasons: 1 << 7, Count: 1}}), store.ErrCorrupt},
		{"report count zero", appendCommand(nil, &fileReportCmd{Filing: store.ReportFiling{Code: "a", Reasons: store.ReasonSpam}}), store.ErrCorrupt},
		{"report with six details", appendCommand(nil, &fileReportCmd{Filing: store.ReportFiling{Code: "a", Reasons: store.ReasonSpam, Count: 1,
			Details: []string{"1", "2", "3", "4", "5", "6"}}}), store.ErrCorrupt},
		{"resolve without action", appendCommand(nil, &resolveReportCmd{Res: store.ReportResolution{ID: 1}}), store.ErrCorrupt},
		{"resolve unknown action", appendCommand(nil, &resolveReportCmd{Res: store.ReportResolution{ID: 1, Action: 9}}), store.ErrCorrupt},
		{"resolve case zero", appendCommand(nil, &resolveReportCmd{Res: store.ReportResolution{Action: store.ReportBlock}}), store.ErrCorrupt},
		{"suspend without an owner", appendSetOwnerSuspended(nil, "", true, 1, "r"), store.ErrCorrupt},
		{"suspend owner with NUL", appendSetOwnerSuspended(nil, "o\x00", true, 1, "r"), store.ErrCorrupt},
		{"unsuspend with a reason", appendCommand(nil, &setOwnerSuspendedCmd{Owner: "o", Reason: "r"}), store.ErrCorrupt},
		{"suspend reason too long", appendSetOwnerSuspended(nil, "o", true, 1, strings.Repeat("r", store.MaxSuspendReason+1)), store.ErrCorrupt},
		{"suspended flag 2", append(bytes.Clone(appendSetOwnerSuspended(nil, "o", true, 0, "")[:5]), 2, 0, 0), store.ErrCorrupt},
		{"purge without codes", appendPurgeDeletedLinks(nil, 1, 2, nil), store.ErrCorrupt},
		{"purge of an empty code", appendPurgeDeletedLinks(nil, 1, 2, []string{"a", ""}), store.ErrCorrupt},
		{"purge before its cutoff", appendPurgeDeletedLinks(nil, 5, 4, []string{"a"}), store.ErrCorrupt},
		{"purge of too many codes", appendPurgeDeletedLinks(nil, 1, 2, make([]string, maxPurgePerEntry+1)), store.ErrCorrupt},
		{"unknown type", []byte{200, 1, 0}, errUnknownCommand},
		{"newer version", []byte{byte(cmdCreateLink), commandTable[cmdCreateLink].version + 1, 0}, errUnknownCommand},
		{"create_link version 3 with the tags flag", asVersion(appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", URL: "u", Redirect: 302, Tags: "sms"}}), 3), store.ErrCorrupt},
		{"create_link with tags out of order", appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", URL: "u", Redirect: 302, Tags: "sms,aa"}}), store.ErrCorrupt},
		{"create_link with an upper-case tag", appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", URL: "u", Redirect: 302, Tags: "Sms"}}), store.ErrCorrupt},
		{"update_link version 3 with the tags bit", asVersion(appendUpdateLink(nil, &store.LinkPatch{Code: "a", SetTags: true, Tags: "sms"}), 3), store.ErrCorrupt},
		{"create_link version 4 with the rules flag", asVersion(appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", URL: "u", Redirect: 302, Rules: testRules}}), 4), store.ErrCorrupt},
		{"create_link with rules that do not decode", appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", URL: "u", Redirect: 302, Rules: "\x01\x00"}}), store.ErrCorrupt},
		{"update_link with rules that do not decode", appendUpdateLink(nil, &store.LinkPatch{Code: "a", SetRules: true, Rules: "\x01\x00"}), store.ErrCorrupt},
		{"update_link version 4 with the rules bit", asVersion(appendUpdateLink(nil, &store.LinkPatch{Code: "a", SetRules: true, Rules: testRules}), 4), store.ErrCorrupt},
		{"update_link with a duplicate tag", appendUpdateLink(nil, &store.LinkPatch{Code: "a", SetTags: true, Tags: "sms,sms"}), store.ErrCorrupt},
		{"create_link version 2 with the domain flag", asVersion(appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "go.acme.com/a", URL: "u", Redirect: 302}}), 2), store.ErrCorrupt},
		{"create_link with a non-canonical domain", appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "Go.acme.com/a", URL: "u", Redirect: 302}}), store.ErrCorrupt},
		{"domain_update of an unknown op", appendDomainUpdate(nil, &store.DomainChange{Op: 9, Name: "a.example", Owner: "o", At: 1}), store.ErrCorrupt},
		{"domain_update of a bad name", appendDomainUpdate(nil, &store.DomainChange{Op: store.DomainRegister, Name: "a.example:80", Owner: "o", At: 1}), store.ErrCorrupt},
		{"domain_update register without owner", appendDomainUpdate(nil, &store.DomainChange{Op: store.DomainRegister, Name: "a.example", At: 1}), store.ErrCorrupt},
		{"create_link version 1 with the query-forwarding flag", asVersion(appendCommand(nil, &createLinkCmd{Link: store.Link{Code: "a", URL: "u", Redirect: 302, NoForwardQuery: true}}), 1), store.ErrCorrupt},
		{"update_link version 2 with the query-forwarding bit", asVersion(appendUpdateLink(nil, &store.LinkPatch{Code: "a", SetForwardQuery: true}), 2), store.ErrCorrupt},
		{"version zero", []byte{byte(cmdCreateLink), 0, 0}, errUnknownCommand},
	}
	for _, tc := range cases {
		_, _, err := decodeCommand(tc.data)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v; want %v", tc.name, err, tc.want)
		}
	}
}

// updateLinkV1 encodes p as version 1 of update_link wrote it, before
// the audit fields: the version 2 encoding without its audit tail.
func updateLinkV1(p *store.LinkPatch) []byte {
	full := appendUpdateLink(nil, p)
	tail := appendPatchAudit(nil, p)
	v1 := bytes.Clone(full[:len(full)-len(tail)])
	v1[1] = 1
	return v1
}

// Entries written before the audit fields still decode, with them unset.
func TestDecodeUpdateLinkVersion1(t *testing.T) {
	p := store.LinkPatch{Code: "abc1234", Owner: "o1", UpdatedAt: 7, SetStatus: true, Status: store.StatusDisabled}
	// By hand: type 2, version 1, flags 0, code, owner, updated_at 7
	// (zigzag 14), mask patchStatus, status 1.
	want := []byte{2, 1, 0, 7, 'a', 'b', 'c', '1', '2', '3', '4', 2, 'o', '1', 14, 8, 1}
	if got := updateLinkV1(&p); !bytes.Equal(got, want) {
		t.Fatalf("version 1 bytes: %v; want %v", got, want)
	}
	h, c, err := decodeCommand(want)
	if err != nil || h.version != 1 || !reflect.DeepEqual(c, &updateLinkCmd{Patch: p}) {
		t.Fatalf("decode version 1: %+v %+v %v; want %+v", h, c, err, p)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range sampleCommands() {
		f.Add(appendCommand(nil, c))
	}
	for _, c := range gatesCommands() { // gates_test.go
		f.Add(appendCommand(nil, c))
	}
	f.Add(updateLinkV1(&store.LinkPatch{Code: "abc", SetURL: true, URL: "https://a"}))
	f.Add([]byte{})
	f.Add([]byte{200, 1, 1, 5})
	f.Add([]byte{1, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, c, err := decodeCommand(data)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, errUnknownCommand) {
				t.Fatalf("got error %v; want ErrCorrupt or errUnknownCommand", err)
			}
			return
		}
		again := appendCommand(nil, c)
		_, c2, err := decodeCommand(again)
		if err != nil {
			t.Fatalf("re-decode of %x: %v", again, err)
		}
		if a, ok := c.(*allocBlockCmd); ok {
			a.version = commandTable[cmdAllocBlock].version // an old version is written as the newest
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip: got %+v; want %+v", c2, c)
		}
	})
}

// asVersion is an encoded command with its header's version set to v.
func asVersion(cmd []byte, v byte) []byte {
	b := bytes.Clone(cmd)
	b[1] = v
	return b
}

// testRules is one encoded rule set for the command tests.
var testRules = func() string {
	enc, err := store.EncodeRules([]store.Rule{
		{URL: "https://apps.example/ios", Devices: store.RuleDeviceIOS},
		{URL: "https://example.de/", Countries: []string{"DE", "AT"}, Query: []store.RuleQuery{{Key: "ref", Values: []string{"qr"}}}},
	})
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return enc
}()
