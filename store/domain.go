package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Custom domains (issue 12): an owner registers a domain (pending), an
// operator approves it, and the owner then creates links on it. A link on
// a custom domain is keyed "L domain/code" and its Link.Code is that
// identifier ("go.acme.com/launch"); a default-domain link keeps its plain
// code. A domain never holds '/', a code never does, so the two key
// spaces cannot meet.

// DomainStatus is a custom domain's state.
type DomainStatus uint8

const (
	DomainPending     DomainStatus = 0 // registered by its owner, not yet approved
	DomainApproved    DomainStatus = 1 // links may be created on it and it serves redirects
	DomainDeleted     DomainStatus = 2 // deleted: serves nothing; only its last owner may register it again
	domainStatusCount DomainStatus = 3
)

var domainStatusNames = [domainStatusCount]string{"pending", "approved", "deleted"}

func (s DomainStatus) String() string {
	if s < domainStatusCount {
		return domainStatusNames[s]
	}
	return fmt.Sprintf("domain_status(%d)", uint8(s))
}

// Domain is one custom domain. Times are Unix ms; ApprovedAt is zero
// until approval.
type Domain struct {
	Name       string
	Owner      string
	Status     DomainStatus
	CreatedAt  int64
	ApprovedAt int64
	UpdatedAt  int64
}

// Errors of custom domains (wire codes 18 and 19 in raft/result.go).
var (
	// ErrDomainNotApproved means a link was to be created on a domain its
	// owner registered but an operator has not approved yet.
	ErrDomainNotApproved = errors.New("domain not approved")
	// ErrDomainNotOwned means a link was to be created on a domain that is
	// not registered to its owner (unknown, deleted or someone else's).
	ErrDomainNotOwned = errors.New("domain not registered to this owner")
)

// MaxDomainLen bounds a custom domain. DNS allows 253 characters; 222
// keeps a link identifier "domain/code" (a code is at most 32) within 255
// bytes, the longest link code a click event and the rollup keys hold.
const MaxDomainLen = 222

// ParseDomainName checks and normalises a custom domain as a client or
// operator typed it: IDNA names go to punycode, ASCII to lower case, one
// trailing dot is dropped. It refuses a port, an IP literal, a single
// label (localhost), underscores, labels that start or end with '-', and
// anything else that is not a DNS host name. The error says why.
func ParseDomainName(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("domain is empty")
	}
	if strings.ContainsAny(raw, "/\\?#@ \t\r\n") {
		return "", fmt.Errorf("domain %q must be a bare host name, without scheme, path, user or spaces", raw)
	}
	if strings.HasPrefix(raw, "[") || strings.Count(raw, ":") > 1 {
		return "", fmt.Errorf("domain %q is an IP address; a custom domain is a DNS name", raw)
	}
	if strings.Contains(raw, ":") {
		return "", fmt.Errorf("domain %q has a port; a custom domain is a host name without a port (links use the scheme and port of the cluster's public URL)", raw)
	}
	name, err := CanonicalName(strings.TrimSuffix(raw, "."))
	if err != nil {
		return "", fmt.Errorf("domain %q is not a valid host name: %w", raw, err)
	}
	if len(name) > MaxDomainLen {
		return "", fmt.Errorf("domain %q is longer than %d characters", raw, MaxDomainLen)
	}
	if EndsInNumber(name) {
		return "", fmt.Errorf("domain %q is an IP address; a custom domain is a DNS name", raw)
	}
	if !strings.Contains(name, ".") {
		return "", fmt.Errorf("domain %q has a single label; a custom domain is a public name such as go.example.com", raw)
	}
	for label := range strings.SplitSeq(name, ".") {
		if strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") || strings.Contains(label, "_") {
			return "", fmt.Errorf("domain %q has the label %q; a label is letters, digits and '-' inside", raw, label)
		}
	}
	return name, nil
}

// CheckDomainName reports whether name is already in ParseDomainName's
// canonical form. Command and record decoders use it, so a replica never
// stores a domain the API would have refused.
func CheckDomainName(name string) error {
	canon, err := ParseDomainName(name)
	if err != nil {
		return err
	}
	if canon != name {
		return fmt.Errorf("domain %q is not in canonical form (%q)", name, canon)
	}
	return nil
}

// LinkID is the identifier (store key, Link.Code, click code) of code on
// domain; "" is the default domain.
func LinkID(domain, code string) string {
	if domain == "" {
		return code
	}
	return domain + "/" + code
}

// SplitLinkID splits an identifier into its domain ("" for the default
// domain) and code.
func SplitLinkID(id string) (domain, code string) {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[:i], id[i+1:]
	}
	return "", id
}

// Domain returns the link's custom domain, "" on the default domain.
func (l *Link) Domain() string { d, _ := SplitLinkID(l.Code); return d }

// ShortCode returns the link's code without its domain: the path of its
// short URL.
func (l *Link) ShortCode() string { _, c := SplitLinkID(l.Code); return c }

const domainVersion = 1

// AppendDomain appends the encoding of d.
func AppendDomain(dst []byte, d *Domain) []byte {
	dst = append(dst, domainVersion)
	dst = AppendString(dst, d.Name)
	dst = AppendString(dst, d.Owner)
	dst = append(dst, byte(d.Status))
	dst = appendVarint(dst, d.CreatedAt)
	dst = appendVarint(dst, d.ApprovedAt)
	return appendVarint(dst, d.UpdatedAt)
}

// DecodeDomain decodes a record written by AppendDomain.
func DecodeDomain(b []byte, d *Domain) error {
	r := NewFieldReader(b)
	if r.Byte() != domainVersion {
		r.Fail()
	}
	d.Name = r.String()
	d.Owner = r.String()
	d.Status = DomainStatus(r.Byte())
	d.CreatedAt = r.Varint()
	d.ApprovedAt = r.Varint()
	d.UpdatedAt = r.Varint()
	if !r.Done() || d.Status >= domainStatusCount || d.Owner == "" || CheckOwnerID(d.Owner) != nil ||
		CheckDomainName(d.Name) != nil || (d.Status == DomainApproved) != (d.ApprovedAt != 0) {
		return fmt.Errorf("cannot decode domain: %w", ErrCorrupt)
	}
	return nil
}

func domainKey(name string) []byte { return append([]byte{tabDomain}, name...) }

func ownerDomainPrefix(owner string) []byte {
	k := make([]byte, 0, len(owner)+2)
	k = append(k, tabOwnerDomain)
	k = append(k, owner...)
	return append(k, 0)
}

func ownerDomainKey(owner, name string) []byte { return append(ownerDomainPrefix(owner), name...) }

// DomainOp is one change of a custom domain (the log's domain_update).
type DomainOp uint8

const (
	DomainRegister DomainOp = 1 // the owner asks for the domain: pending
	DomainAdd      DomainOp = 2 // the operator adds it for an owner: approved
	DomainApprove  DomainOp = 3 // the operator approves a pending domain
	DomainDelete   DomainOp = 4 // the owner (or operator, Owner "") deletes it
	domainOpLast   DomainOp = DomainDelete
)

// DomainChange is one domain_update: Owner is the caller for Register and
// Delete ("" means the operator), the new owner for Add.
type DomainChange struct {
	Op    DomainOp
	Name  string
	Owner string
	At    int64 // the proposer's clock, Unix ms
}

// Check refuses a change no replica could apply for its own bytes.
func (c *DomainChange) Check() error {
	if c.Op == 0 || c.Op > domainOpLast {
		return fmt.Errorf("unknown domain operation %d", c.Op)
	}
	if err := CheckDomainName(c.Name); err != nil {
		return err
	}
	if err := CheckOwnerID(c.Owner); err != nil {
		return err
	}
	if (c.Op == DomainRegister || c.Op == DomainAdd) && c.Owner == "" {
		return errors.New("a domain needs an owner")
	}
	if c.At <= 0 {
		return errors.New("a domain change needs its time")
	}
	return nil
}

// Domain reads a custom domain as of the batch.
func (b *Batch) Domain(name string) (Domain, bool, error) {
	var d Domain
	found, err := get(b.b, domainKey(name), func(v []byte) error { return DecodeDomain(v, &d) })
	if err != nil {
		return Domain{}, false, fmt.Errorf("cannot read domain %q: %w", name, err)
	}
	return d, found, nil
}

// UpdateDomain applies one change and returns the domain as stored.
// Refusals (deterministic, the same on every replica): registering a
// domain someone else holds is ErrDomainTaken; approving, or deleting, an
// unknown domain (or another owner's) is ErrNotFound. Registering one's
// own pending or approved domain again changes nothing.
func (b *Batch) UpdateDomain(c *DomainChange) (Domain, error) {
	if err := c.Check(); err != nil {
		return Domain{}, fmt.Errorf("cannot change domain %q: %w", c.Name, err)
	}
	d, found, err := b.Domain(c.Name)
	if err != nil {
		return Domain{}, err
	}
	switch c.Op {
	case DomainRegister, DomainAdd:
		// A deleted domain stays its last owner's: their links on it are
		// still theirs and would serve again under a new owner.
		if found && d.Owner != c.Owner {
			return Domain{}, fmt.Errorf("cannot register domain %q: %w", c.Name, ErrDomainTaken)
		}
		if found && d.Status != DomainDeleted && (c.Op == DomainRegister || d.Status == DomainApproved) {
			return d, nil // already there: nothing changes
		}
		if !found || d.Status == DomainDeleted {
			d = Domain{Name: c.Name, Owner: c.Owner, Status: DomainPending, CreatedAt: c.At}
		}
		if c.Op == DomainAdd && d.Status != DomainApproved {
			d.Status, d.ApprovedAt = DomainApproved, c.At
		}
	case DomainApprove:
		if !found || d.Status == DomainDeleted {
			return Domain{}, fmt.Errorf("cannot approve domain %q: %w", c.Name, ErrNotFound)
		}
		if d.Status == DomainApproved {
			return d, nil
		}
		d.Status, d.ApprovedAt = DomainApproved, c.At
	case DomainDelete:
		if !found || d.Status == DomainDeleted || (c.Owner != "" && c.Owner != d.Owner) {
			return Domain{}, fmt.Errorf("cannot delete domain %q: %w", c.Name, ErrNotFound)
		}
		d.Status, d.ApprovedAt = DomainDeleted, 0
	}
	d.UpdatedAt = c.At
	if err := b.set(domainKey(d.Name), AppendDomain(nil, &d)); err != nil {
		return Domain{}, fmt.Errorf("cannot write domain %q: %w", d.Name, err)
	}
	ik := ownerDomainKey(d.Owner, d.Name)
	if d.Status == DomainDeleted {
		if err := b.b.Delete(ik, nil); err != nil {
			return Domain{}, fmt.Errorf("cannot unindex domain %q: %w", d.Name, storageErr(err))
		}
	} else if err := b.set(ik, nil); err != nil {
		return Domain{}, fmt.Errorf("cannot index domain %q: %w", d.Name, err)
	}
	// Deleting or approving changes what redirects serve: sync like a
	// takedown, so a power loss cannot bring a deleted domain back.
	b.durable = true
	b.domainChanged = true
	return d, nil
}

// checkLinkDomain refuses a link on a custom domain that is not approved
// for the link's owner, as of the batch.
func (b *Batch) checkLinkDomain(l *Link) error {
	name := l.Domain()
	if name == "" {
		return nil
	}
	d, found, err := b.Domain(name)
	if err != nil {
		return err
	}
	switch {
	case !found || d.Owner != l.Owner || d.Status == DomainDeleted:
		return fmt.Errorf("domain %q: %w", name, ErrDomainNotOwned)
	case d.Status != DomainApproved:
		return fmt.Errorf("domain %q: %w", name, ErrDomainNotApproved)
	}
	return nil
}

// Domain returns one custom domain.
func (s *Store) Domain(name string) (Domain, bool, error) {
	var d Domain
	found, err := get(s.db, domainKey(name), func(v []byte) error { return DecodeDomain(v, &d) })
	if err != nil {
		return Domain{}, false, fmt.Errorf("cannot read domain %q: %w", name, err)
	}
	return d, found, nil
}

// OwnerDomains lists an owner's domains (pending and approved), by name.
func (s *Store) OwnerDomains(owner string) ([]Domain, error) {
	prefix := ownerDomainPrefix(owner)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("cannot list domains: %w", storageErr(err))
	}
	defer it.Close()
	var out []Domain
	for valid := it.First(); valid; valid = it.Next() {
		d, found, err := s.Domain(string(it.Key()[len(prefix):]))
		if err != nil {
			return nil, err
		}
		if found && d.Owner == owner && d.Status != DomainDeleted {
			out = append(out, d)
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cannot list domains: %w", storageErr(err))
	}
	return out, nil
}

// Domains lists every domain record, deleted ones included, by name.
func (s *Store) Domains() ([]Domain, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabDomain}, UpperBound: []byte{tabDomain + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot list domains: %w", storageErr(err))
	}
	defer it.Close()
	var out []Domain
	for valid := it.First(); valid; valid = it.Next() {
		var d Domain
		if err := DecodeDomain(it.Value(), &d); err != nil {
			return nil, storageErr(err)
		}
		out = append(out, d)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cannot list domains: %w", storageErr(err))
	}
	return out, nil
}

// DomainSet is the approved domains, name -> owner: what the redirect
// path consults for every request on a Host other than the public one.
// Immutable once published.
type DomainSet struct{ owners map[string]string }

// Owner returns the owner of an approved domain. A []byte key converted
// in the index expression does not allocate.
func (ds *DomainSet) Owner(name []byte) (string, bool) {
	if ds == nil || len(ds.owners) == 0 {
		return "", false
	}
	o, ok := ds.owners[string(name)]
	return o, ok
}

// Len is the number of approved domains.
func (ds *DomainSet) Len() int {
	if ds == nil {
		return 0
	}
	return len(ds.owners)
}

// ApprovedDomains returns the current set (never nil once the store is
// open): one atomic load.
func (s *Store) ApprovedDomains() *DomainSet { return s.domains.Load() }

// loadDomains rebuilds the approved set from the table (at open, after a
// restore, after a batch that changed a domain). Domains are few (one
// per brand), so a rebuild per change is cheap.
func (s *Store) loadDomains() error {
	all, err := s.Domains()
	if err != nil {
		return err
	}
	ds := &DomainSet{owners: make(map[string]string)}
	for _, d := range all {
		if d.Status == DomainApproved {
			ds.owners[d.Name] = d.Owner
		}
	}
	s.domains.Store(ds)
	return nil
}
