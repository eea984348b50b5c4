package store

import (
	"fmt"
	"strings"
	"time"
)

// Status is a link's state. Anything but StatusActive stops the redirect.
type Status uint8

const (
	StatusActive     Status = 0
	StatusDisabled   Status = 1 // deleted by the owner: 410, code stays reserved
	StatusBlocked    Status = 2 // abuse: warning page without a link
	StatusLegalBlock Status = 3 // 451
	StatusReview     Status = 4 // interstitial with a continue button
	StatusLimited    Status = 5 // click limit reached: 410
	statusCount             = 6
)

var statusNames = [statusCount]string{"active", "disabled", "blocked", "legal_block", "review", "limited"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// ParseStatus parses a status name.
func ParseStatus(name string) (Status, bool) {
	for i, n := range statusNames {
		if n == name {
			return Status(i), true
		}
	}
	return 0, false
}

// Redirect types a link may use.
var validRedirects = [...]uint16{301, 302, 307, 308}

// ValidRedirect reports whether code is an allowed redirect status.
func ValidRedirect(code int) bool {
	for _, r := range validRedirects {
		if int(r) == code {
			return true
		}
	}
	return false
}

// Link is one short link. Times are Unix milliseconds; zero means unset.
type Link struct {
	Code       string
	URL        string
	Owner      string
	CreatedAt  int64
	UpdatedAt  int64
	ExpiresAt  int64
	ClickLimit int64
	Status     Status
	Redirect   uint16
	Index      uint64 // Raft index of the last change
	// ReviewUntil (Unix ms) is the end of the review window an edit of the
	// destination opens: until then the link shows the review
	// interstitial before redirecting (bait and switch). Zero: none.
	ReviewUntil int64
	// NoForwardQuery turns off query forwarding: by default a visit's query
	// string is merged into the destination's (edge/query.go). The zero
	// value forwards, so records written before the option forward too.
	NoForwardQuery bool
	// Tags label the link for listing (tags.go), in normal form: sorted,
	// distinct, at most MaxTags, joined by ','; empty for none. A string
	// rather than a slice keeps Link comparable.
	Tags string
	// Rules are the link's redirect rules (rules.go) as EncodeRules
	// returns them; empty for none. An encoded string keeps Link
	// comparable.
	Rules string
	// PasswordHash is the argon2id PHC string of the link's password
	// (gates.go); "" for none. The password itself is never stored.
	PasswordHash string
	// Preview is the social preview, encoded (EncodePreview); "" for none.
	Preview string
}

// InReview reports whether an edit's review window is open at now (ms).
func (l *Link) InReview(now int64) bool { return l.ReviewUntil != 0 && now < l.ReviewUntil }

// Permanent reports whether browsers may cache the redirect forever, in
// which case the destination can no longer be changed.
func (l *Link) Permanent() bool { return l.Redirect == 301 || l.Redirect == 308 }

// Expired reports whether the link has passed its expiry at now.
func (l *Link) Expired(now time.Time) bool {
	return l.ExpiresAt != 0 && now.UnixMilli() >= l.ExpiresAt
}

// Version 1 is a link without a review window; version 2 appends
// ReviewUntil, which is then never zero, so each link keeps one encoding
// and records written before the window existed read unchanged.
const (
	linkVersion       = 1
	linkVersionReview = 2
	// linkVersionOptions is version 1's fields, then a byte of options
	// (linkOpt*), then ReviewUntil if linkOptReview is set. Written only
	// for a link with an option set, so every other record keeps its
	// version 1 or 2 bytes.
	linkVersionOptions = 3
)

const (
	linkOptReview         = 1 << 0
	linkOptNoForwardQuery = 1 << 1
	// linkOptDomain: the link is on a custom domain. The record's code
	// field holds the bare code and the domain follows ReviewUntil;
	// decoded, Link.Code is the identifier "domain/code" (domain.go).
	linkOptDomain   = 1 << 2
	linkOptTags     = 1 << 3 // the tags (a string, not empty, normal form) follow the domain
	linkOptRules    = 1 << 4 // the redirect rules (EncodeRules, not empty) follow the tags
	linkOptPassword = 1 << 5 // the password hash (PHC string, not empty) follows the rules
	linkOptPreview  = 1 << 6 // the encoded preview (not empty) follows the password hash
	linkOptKnown    = linkOptReview | linkOptNoForwardQuery | linkOptDomain | linkOptTags | linkOptRules | linkOptPassword | linkOptPreview
	// linkOptNeedV3: the options only version 3 can hold.
	linkOptNeedV3 = linkOptNoForwardQuery | linkOptDomain | linkOptTags | linkOptRules | linkOptPassword | linkOptPreview
)

// AppendLink appends the encoding of l to dst.
func AppendLink(dst []byte, l *Link) []byte {
	domain, code := SplitLinkID(l.Code)
	options := l.NoForwardQuery || domain != "" || l.Tags != "" || l.Rules != "" || l.PasswordHash != "" || l.Preview != ""
	switch {
	case options:
		dst = append(dst, linkVersionOptions)
	case l.ReviewUntil != 0:
		dst = append(dst, linkVersionReview)
	default:
		dst = append(dst, linkVersion)
	}
	dst = AppendString(dst, code)
	dst = AppendString(dst, l.URL)
	dst = AppendString(dst, l.Owner)
	dst = appendVarint(dst, l.CreatedAt)
	dst = appendVarint(dst, l.UpdatedAt)
	dst = appendVarint(dst, l.ExpiresAt)
	dst = appendVarint(dst, l.ClickLimit)
	dst = append(dst, byte(l.Status))
	dst = appendUvarint(dst, uint64(l.Redirect))
	dst = appendUvarint(dst, l.Index)
	if options {
		var opts byte
		if l.NoForwardQuery {
			opts |= linkOptNoForwardQuery
		}
		if l.ReviewUntil != 0 {
			opts |= linkOptReview
		}
		if domain != "" {
			opts |= linkOptDomain
		}
		if l.Tags != "" {
			opts |= linkOptTags
		}
		if l.Rules != "" {
			opts |= linkOptRules
		}
		if l.PasswordHash != "" {
			opts |= linkOptPassword
		}
		if l.Preview != "" {
			opts |= linkOptPreview
		}
		dst = append(dst, opts)
	}
	if l.ReviewUntil != 0 {
		dst = appendVarint(dst, l.ReviewUntil)
	}
	if domain != "" {
		dst = AppendString(dst, domain)
	}
	if l.Tags != "" {
		dst = AppendString(dst, l.Tags)
	}
	if l.Rules != "" {
		dst = AppendString(dst, l.Rules)
	}
	if l.PasswordHash != "" {
		dst = AppendString(dst, l.PasswordHash)
	}
	if l.Preview != "" {
		dst = AppendString(dst, l.Preview)
	}
	return dst
}

// checkLink refuses a link that DecodeLink would reject, so a bad command
// can never leave an unreadable record on every replica.
func checkLink(l *Link) error {
	if l.Status >= statusCount {
		return fmt.Errorf("unknown status %d", l.Status)
	}
	if !ValidRedirect(int(l.Redirect)) {
		return fmt.Errorf("redirect %d is not 301, 302, 307 or 308", l.Redirect)
	}
	if err := CheckStoredTags(l.Tags); err != nil {
		return err
	}
	if err := CheckStoredRules(l.Rules); err != nil {
		return err
	}
	if err := CheckPasswordHash(l.PasswordHash); err != nil {
		return err
	}
	if err := CheckStoredPreview(l.Preview); err != nil {
		return err
	}
	return CheckLinkID(l.Code)
}

// CheckLinkID refuses an identifier DecodeLink would not give back: a
// custom domain in canonical form, one '/', a code after it.
func CheckLinkID(id string) error {
	domain, code := SplitLinkID(id)
	if code == "" {
		return fmt.Errorf("link %q has no code", id)
	}
	if domain == "" {
		if strings.IndexByte(id, '/') >= 0 {
			return fmt.Errorf("link %q has an empty domain", id)
		}
		return nil
	}
	if err := CheckDomainName(domain); err != nil {
		return fmt.Errorf("link %q: %w", id, err)
	}
	return nil
}

// DecodeLink decodes a record written by AppendLink.
func DecodeLink(b []byte, l *Link) error {
	r := NewFieldReader(b)
	version := r.Byte()
	if version != linkVersion && version != linkVersionReview && version != linkVersionOptions {
		return fmt.Errorf("cannot decode link: %w: unknown version", ErrCorrupt)
	}
	l.Code = r.String()
	l.URL = r.String()
	l.Owner = r.String()
	l.CreatedAt = r.Varint()
	l.UpdatedAt = r.Varint()
	l.ExpiresAt = r.Varint()
	l.ClickLimit = r.Varint()
	l.Status = Status(r.Byte())
	redirect := r.Uvarint()
	l.Redirect = uint16(redirect)
	l.Index = r.Uvarint()
	l.ReviewUntil, l.NoForwardQuery, l.Tags, l.Rules, l.PasswordHash, l.Preview = 0, false, "", "", "", ""
	review, onDomain, tags := version == linkVersionReview, false, false
	rules, password, preview := false, false, false
	if version == linkVersionOptions {
		// One link, one encoding: version 3 only with an option that
		// versions 1 and 2 cannot hold.
		opts := r.Byte()
		if opts&^linkOptKnown != 0 || opts&linkOptNeedV3 == 0 {
			r.Fail()
		}
		review, l.NoForwardQuery = opts&linkOptReview != 0, opts&linkOptNoForwardQuery != 0
		onDomain, tags = opts&linkOptDomain != 0, opts&linkOptTags != 0
		rules = opts&linkOptRules != 0
		password, preview = opts&linkOptPassword != 0, opts&linkOptPreview != 0
	}
	if review {
		if l.ReviewUntil = r.Varint(); l.ReviewUntil == 0 {
			r.Fail() // version 1 encodes a link without a window
		}
	}
	if onDomain {
		domain := r.String()
		if CheckDomainName(domain) != nil || strings.IndexByte(l.Code, '/') >= 0 || l.Code == "" {
			r.Fail()
		} else {
			l.Code = LinkID(domain, l.Code)
		}
	} else if strings.IndexByte(l.Code, '/') >= 0 {
		r.Fail() // a default-domain code never holds '/'
	}
	if tags {
		if l.Tags = r.String(); l.Tags == "" || !checkStoredTags(l.Tags) {
			r.Fail()
		}
	}
	if rules {
		if l.Rules = r.String(); l.Rules == "" || CheckStoredRules(l.Rules) != nil {
			r.Fail()
		}
	}
	if password {
		if l.PasswordHash = r.String(); l.PasswordHash == "" || CheckPasswordHash(l.PasswordHash) != nil {
			r.Fail()
		}
	}
	if preview {
		if l.Preview = r.String(); l.Preview == "" || CheckStoredPreview(l.Preview) != nil {
			r.Fail()
		}
	}
	if !r.Done() || l.Status >= statusCount || redirect > 0xffff || !ValidRedirect(int(l.Redirect)) {
		return fmt.Errorf("cannot decode link: %w", ErrCorrupt)
	}
	return nil
}
