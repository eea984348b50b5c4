package raft

import (
	"errors"
	"fmt"
	"strings"

	"github.com/waymark/waymark/store"
)

// A log entry's Data is a command: a three-byte header, then the payload.
//
//	type    byte  what the command does (cmdType); never renumbered or reused
//	version byte  payload layout of that type, starting at 1
//	flags   byte  bit 0 = skippable; other bits are ignored
//	payload ...   per type and version, see the append* encoders
//
// A node that meets a type or version it does not know skips the entry if
// the writer marked it skippable (a rolling upgrade can then add optional
// commands) and otherwise reports a broken invariant for that entry.
const headerLen = 3

// cmdType names a command in the log.
type cmdType byte

const (
	cmdCreateLink  cmdType = 1
	cmdUpdateLink  cmdType = 2
	cmdCreateOwner cmdType = 3
	cmdCreateSite  cmdType = 4
	cmdAllocBlock  cmdType = 5
	cmdSetSecret   cmdType = 6
	cmdUpdateSite  cmdType = 7
	// Issue 10: explicit region slots and idempotency expiry.
	cmdClaimRegion       cmdType = 8
	cmdExpireIdempotency cmdType = 9
	cmdSetClusterID      cmdType = 10
	// Issue 11: the replicated blocklist.
	cmdBlocklistUpdate cmdType = 14
	// Issue 11: public abuse reports (reportcmd.go).
	cmdFileReport    cmdType = 12
	cmdResolveReport cmdType = 13
	// Issue 11 (abuse): owner suspension and the purge of deleted links.
	cmdSetOwnerSuspended cmdType = 15
	cmdPurgeDeletedLinks cmdType = 16
	// Issue 12: custom domains (domaincmd.go).
	cmdDomainUpdate cmdType = 17
	// Issue 12 (bulk): up to 1,000 link creates in one entry (bulkcmd.go).
	cmdCreateLinksBulk cmdType = 21
	// Issue 12: API keys with scopes (keyscmd.go).
	cmdCreateKey cmdType = 18
	cmdRevokeKey cmdType = 19
	cmdTouchKeys cmdType = 20
)

// flagSkippable lets a node that does not know the command skip it.
const flagSkippable byte = 1 << 0

// errUnknownCommand means the type or version is newer than this node.
var errUnknownCommand = errors.New("unknown command")

// command is one decoded log command. apply lives in apply.go.
type command interface {
	kind() cmdType
	appendPayload(dst []byte) []byte
	apply(a *applier, index uint64, res *applyResult)
}

// commandSpec is one row of the dispatch table.
type commandSpec struct {
	name    string
	version byte // newest payload version this node reads and writes
	flags   byte // flags this node sets when it writes the command
	decode  func(version byte, payload []byte) (command, error)
}

// commandTable maps each type to its decoder; the decoded command applies
// itself. It is read-only after init.
var commandTable = map[cmdType]commandSpec{
	cmdCreateLink:        {name: "create_link", version: 5, decode: decodeCreateLink},
	cmdUpdateLink:        {name: "update_link", version: 5, decode: decodeUpdateLink},
	cmdCreateOwner:       {name: "create_owner", version: 1, decode: decodeCreateOwner},
	cmdCreateSite:        {name: "create_site", version: 1, decode: decodeCreateSite},
	cmdAllocBlock:        {name: "alloc_block", version: 2, decode: decodeAllocBlock},
	cmdSetSecret:         {name: "set_secret", version: 1, decode: decodeSetSecret},
	cmdUpdateSite:        {name: "update_site", version: 1, decode: decodeUpdateSite},
	cmdClaimRegion:       {name: "claim_region", version: 1, decode: decodeClaimRegion},
	cmdExpireIdempotency: {name: "expire_idempotency", version: 1, decode: decodeExpireIdempotency},
	cmdSetClusterID:      {name: "set_cluster_id", version: 1, decode: decodeSetClusterID},
	cmdBlocklistUpdate:   {name: "blocklist_update", version: 1, decode: decodeBlocklistUpdate},
	cmdFileReport:        {name: "file_report", version: 1, decode: decodeFileReport},
	cmdResolveReport:     {name: "resolve_report", version: 1, decode: decodeResolveReport},
	cmdSetOwnerSuspended: {name: "set_owner_suspended", version: 1, decode: decodeSetOwnerSuspended},
	cmdPurgeDeletedLinks: {name: "purge_deleted_links", version: 1, decode: decodePurgeDeletedLinks},
	cmdDomainUpdate:      {name: "domain_update", version: 1, decode: decodeDomainUpdate},
	cmdCreateLinksBulk:   {name: "create_links_bulk", version: 2, decode: decodeCreateLinksBulk}, // bulkcmd.go
	cmdCreateKey:         {name: "create_key", version: 1, decode: decodeCreateKey},
	cmdRevokeKey:         {name: "revoke_key", version: 1, decode: decodeRevokeKey},
	cmdTouchKeys:         {name: "touch_keys", version: 1, decode: decodeTouchKeys},
}

// header is the fixed start of every command.
type header struct {
	typ     cmdType
	version byte
	flags   byte
}

func (h header) skippable() bool { return h.flags&flagSkippable != 0 }

// appendCommand appends c with its header to dst.
func appendCommand(dst []byte, c command) []byte {
	spec := commandTable[c.kind()]
	dst = append(dst, byte(c.kind()), spec.version, spec.flags)
	return c.appendPayload(dst)
}

// decodeCommand splits data into header and command. It returns
// errUnknownCommand (with a valid header) for a type or version this node
// does not know, and an error wrapping store.ErrCorrupt for bad bytes. It
// never panics.
func decodeCommand(data []byte) (header, command, error) {
	if len(data) < headerLen {
		return header{}, nil, fmt.Errorf("cannot decode command: %w: %d bytes", store.ErrCorrupt, len(data))
	}
	h := header{typ: cmdType(data[0]), version: data[1], flags: data[2]}
	spec, ok := commandTable[h.typ]
	if !ok || h.version == 0 || h.version > spec.version {
		return h, nil, fmt.Errorf("cannot decode command type %d version %d: %w", h.typ, h.version, errUnknownCommand)
	}
	c, err := spec.decode(h.version, data[headerLen:])
	if err != nil {
		return h, nil, err
	}
	return h, c, nil
}

func corrupt(name string) error {
	return fmt.Errorf("cannot decode %s command: %w", name, store.ErrCorrupt)
}

// invalid refuses a command whose bytes decode but whose field the store
// could not hold. It reads as corrupt: no correct writer produces it.
func invalid(name string, err error) error {
	return fmt.Errorf("cannot decode %s command: %w: %w", name, store.ErrCorrupt, err)
}

// validStatus reports whether s is a status this build knows.
func validStatus(s store.Status) bool {
	_, ok := store.ParseStatus(s.String())
	return ok
}

// createLinkCmd creates a link, optionally with the idempotency record that
// answers a retry of the same request.
type createLinkCmd struct {
	Link store.Link // Index is set by the FSM, not carried
	Idem *store.IdempotencyWrite
}

func (c *createLinkCmd) kind() cmdType { return cmdCreateLink }

// appendCreateLink encodes a CreateLink command.
func appendCreateLink(dst []byte, l *store.Link, idem *store.IdempotencyWrite) []byte {
	return appendCommand(dst, &createLinkCmd{Link: *l, Idem: idem})
}

// Bits of create_link's flags byte. Version 1 knows only createIdem.
const (
	createIdem           byte = 1 << 0 // an idempotency record follows
	createNoForwardQuery byte = 1 << 1 // version 2: the link does not forward queries
	createDomain         byte = 1 << 2 // version 3: the link's custom domain follows
	createTags           byte = 1 << 3 // version 4: the link's tags (a string, normal form) follow, after the domain
	// Version 5 (issue 13): redirect rules, password hash, preview.
	createRules    byte = 1 << 4 // the link's redirect rules (store.EncodeRules) follow, after the tags
	createPassword byte = 1 << 5 // the password hash (PHC string) follows, after the rules
	createPreview  byte = 1 << 6 // the encoded preview follows, after the password hash
)

func (c *createLinkCmd) appendPayload(dst []byte) []byte {
	// The code field holds the bare code; a custom domain travels in its
	// own field, so a node that does not know domains refuses the entry
	// instead of creating "domain/code" as a default-domain code.
	l := c.Link
	domain, code := store.SplitLinkID(l.Code)
	l.Code = code
	dst = appendLinkFields(dst, &l)
	var flags byte
	if c.Idem != nil {
		flags |= createIdem
	}
	if c.Link.NoForwardQuery {
		flags |= createNoForwardQuery
	}
	if domain != "" {
		flags |= createDomain
	}
	if c.Link.Tags != "" {
		flags |= createTags
	}
	if c.Link.Rules != "" {
		flags |= createRules
	}
	if c.Link.PasswordHash != "" {
		flags |= createPassword
	}
	if c.Link.Preview != "" {
		flags |= createPreview
	}
	dst = append(dst, flags)
	if c.Idem != nil {
		dst = appendString(dst, c.Idem.Owner)
		dst = appendString(dst, c.Idem.Key)
		dst = appendIdempotency(dst, &c.Idem.Record)
	}
	if domain != "" {
		dst = appendString(dst, domain)
	}
	if c.Link.Tags != "" {
		dst = appendString(dst, c.Link.Tags)
	}
	if c.Link.Rules != "" {
		dst = appendString(dst, c.Link.Rules)
	}
	if c.Link.PasswordHash != "" {
		dst = appendString(dst, c.Link.PasswordHash)
	}
	if c.Link.Preview != "" {
		dst = appendString(dst, c.Link.Preview)
	}
	return dst
}

func decodeCreateLink(version byte, p []byte) (command, error) {
	r := newReader(p)
	c := &createLinkCmd{}
	r.linkFields(&c.Link)
	known := createIdem
	if version >= 2 {
		known |= createNoForwardQuery
	}
	if version >= 3 {
		known |= createDomain
	}
	if version >= 4 {
		known |= createTags
	}
	if version >= 5 {
		known |= createRules | createPassword | createPreview
	}
	flags := r.Byte()
	if flags&^known != 0 {
		r.Fail()
	}
	c.Link.NoForwardQuery = flags&createNoForwardQuery != 0
	if flags&createIdem != 0 {
		c.Idem = &store.IdempotencyWrite{Owner: r.String(), Key: r.String()}
		r.idempotency(&c.Idem.Record)
	}
	if strings.IndexByte(c.Link.Code, '/') >= 0 {
		r.Fail() // a bare code; the domain has its own field
	}
	if flags&createDomain != 0 {
		domain := r.String()
		if err := store.CheckDomainName(domain); err != nil {
			return nil, invalid("create_link", err)
		}
		c.Link.Code = store.LinkID(domain, c.Link.Code)
	}
	if flags&createTags != 0 {
		// One command, one encoding: the flag never carries empty tags.
		if c.Link.Tags = r.String(); c.Link.Tags == "" {
			r.Fail()
		}
	}
	if flags&createRules != 0 {
		if c.Link.Rules = r.String(); c.Link.Rules == "" {
			r.Fail()
		}
	}
	if flags&createPassword != 0 {
		if c.Link.PasswordHash = r.String(); c.Link.PasswordHash == "" {
			r.Fail()
		}
	}
	if flags&createPreview != 0 {
		if c.Link.Preview = r.String(); c.Link.Preview == "" {
			r.Fail()
		}
	}
	if !r.Done() {
		return nil, corrupt("create_link")
	}
	if err := store.CheckStoredRules(c.Link.Rules); err != nil {
		return nil, invalid("create_link", err)
	}
	if err := store.CheckPasswordHash(c.Link.PasswordHash); err != nil {
		return nil, invalid("create_link", err)
	}
	if err := store.CheckStoredPreview(c.Link.Preview); err != nil {
		return nil, invalid("create_link", err)
	}
	if err := store.CheckStoredTags(c.Link.Tags); err != nil {
		return nil, invalid("create_link", err)
	}
	if err := store.CheckOwnerID(c.Link.Owner); err != nil {
		return nil, invalid("create_link", err)
	}
	if c.Idem != nil {
		if err := store.CheckOwnerID(c.Idem.Owner); err != nil {
			return nil, invalid("create_link", err)
		}
	}
	return c, nil
}

// updateLinkCmd edits a link. Version 2 appends the audit fields (actor,
// action, reason), the condition (OnlyFrom) and the review window to
// version 1's payload; version 1 entries decode with them unset.
type updateLinkCmd struct {
	Patch store.LinkPatch
}

func (c *updateLinkCmd) kind() cmdType { return cmdUpdateLink }

// appendUpdateLink encodes an UpdateLink command.
func appendUpdateLink(dst []byte, p *store.LinkPatch) []byte {
	return appendCommand(dst, &updateLinkCmd{Patch: *p})
}

// Bits of the UpdateLink field mask: one byte up to version 4, a uvarint
// from version 5.
const (
	patchURL uint64 = 1 << iota
	patchExpiresAt
	patchClickLimit
	patchStatus
	patchForwardQuery // version 3
	patchTags         // version 4: the new tags (a string, normal form; empty clears)
	patchRules        // version 5: the new redirect rules (store.EncodeRules; empty clears)
	patchPassword     // version 5: the new password hash (PHC string; empty removes)
	patchPreview      // version 5: the new encoded preview (empty removes)
	patchKnown        = patchURL | patchExpiresAt | patchClickLimit | patchStatus
)

func (c *updateLinkCmd) appendPayload(dst []byte) []byte {
	p := &c.Patch
	dst = appendString(dst, p.Code)
	dst = appendString(dst, p.Owner)
	dst = appendVarints(dst, p.UpdatedAt)
	var mask uint64
	if p.SetURL {
		mask |= patchURL
	}
	if p.SetExpiresAt {
		mask |= patchExpiresAt
	}
	if p.SetClickLimit {
		mask |= patchClickLimit
	}
	if p.SetStatus {
		mask |= patchStatus
	}
	if p.SetForwardQuery {
		mask |= patchForwardQuery
	}
	if p.SetTags {
		mask |= patchTags
	}
	if p.SetRules {
		mask |= patchRules
	}
	if p.SetPassword {
		mask |= patchPassword
	}
	if p.SetPreview {
		mask |= patchPreview
	}
	dst = appendUvarint(dst, mask) // version 5: a uvarint

	if p.SetURL {
		dst = appendString(dst, p.URL)
	}
	if p.SetExpiresAt {
		dst = appendVarints(dst, p.ExpiresAt)
	}
	if p.SetClickLimit {
		dst = appendVarints(dst, p.ClickLimit)
	}
	if p.SetStatus {
		dst = append(dst, byte(p.Status))
	}
	if p.SetForwardQuery {
		dst = append(dst, boolByte(p.NoForwardQuery))
	}
	if p.SetTags {
		dst = appendString(dst, p.Tags)
	}
	if p.SetRules {
		dst = appendString(dst, p.Rules)
	}
	if p.SetPassword {
		dst = appendString(dst, p.PasswordHash)
	}
	if p.SetPreview {
		dst = appendString(dst, p.Preview)
	}
	return appendPatchAudit(dst, p)
}

func decodeUpdateLink(version byte, b []byte) (command, error) {
	r := newReader(b)
	c := &updateLinkCmd{}
	p := &c.Patch
	p.Code = r.String()
	p.Owner = r.String()
	p.UpdatedAt = r.Varint()
	var mask uint64
	if version >= 5 {
		mask = r.Uvarint()
	} else {
		mask = uint64(r.Byte())
	}
	known := patchKnown
	if version >= 3 {
		known |= patchForwardQuery
	}
	if version >= 4 {
		known |= patchTags
	}
	if version >= 5 {
		known |= patchRules | patchPassword | patchPreview
	}
	if mask&^known != 0 {
		r.Fail()
	}
	if p.SetURL = mask&patchURL != 0; p.SetURL {
		p.URL = r.String()
	}
	if p.SetExpiresAt = mask&patchExpiresAt != 0; p.SetExpiresAt {
		p.ExpiresAt = r.Varint()
	}
	if p.SetClickLimit = mask&patchClickLimit != 0; p.SetClickLimit {
		p.ClickLimit = r.Varint()
	}
	if p.SetStatus = mask&patchStatus != 0; p.SetStatus {
		p.Status = store.Status(r.Byte())
	}
	if p.SetForwardQuery = mask&patchForwardQuery != 0; p.SetForwardQuery {
		p.NoForwardQuery = r.bool()
	}
	if p.SetTags = mask&patchTags != 0; p.SetTags {
		p.Tags = r.String()
	}
	if p.SetRules = mask&patchRules != 0; p.SetRules {
		p.Rules = r.String()
	}
	if p.SetPassword = mask&patchPassword != 0; p.SetPassword {
		p.PasswordHash = r.String()
	}
	if p.SetPreview = mask&patchPreview != 0; p.SetPreview {
		p.Preview = r.String()
	}
	if version >= 2 {
		r.patchAudit(p)
	}
	if !r.Done() || p.Code == "" || !validStatus(p.Status) {
		return nil, corrupt("update_link")
	}
	if err := store.CheckOwnerID(p.Owner); err != nil {
		return nil, invalid("update_link", err)
	}
	if err := store.CheckStoredTags(p.Tags); err != nil {
		return nil, invalid("update_link", err)
	}
	if err := store.CheckStoredRules(p.Rules); err != nil {
		return nil, invalid("update_link", err)
	}
	if err := store.CheckPasswordHash(p.PasswordHash); err != nil {
		return nil, invalid("update_link", err)
	}
	if err := store.CheckStoredPreview(p.Preview); err != nil {
		return nil, invalid("update_link", err)
	}
	return c, nil
}

// createOwnerCmd registers an owner and the hash of its API key.
type createOwnerCmd struct {
	Owner store.Owner
	Key   store.KeyHash
}

func (c *createOwnerCmd) kind() cmdType { return cmdCreateOwner }

// appendCreateOwner encodes a CreateOwner command.
func appendCreateOwner(dst []byte, o *store.Owner, h store.KeyHash) []byte {
	return appendCommand(dst, &createOwnerCmd{Owner: *o, Key: h})
}

func (c *createOwnerCmd) appendPayload(dst []byte) []byte {
	dst = appendString(dst, c.Owner.ID)
	dst = appendString(dst, c.Owner.Name)
	dst = appendVarints(dst, c.Owner.CreatedAt)
	return append(dst, c.Key[:]...)
}

func decodeCreateOwner(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &createOwnerCmd{}
	c.Owner.ID = r.String()
	c.Owner.Name = r.String()
	c.Owner.CreatedAt = r.Varint()
	copy(c.Key[:], r.Fixed(len(c.Key)))
	if !r.Done() || c.Owner.ID == "" {
		return nil, corrupt("create_owner")
	}
	if err := store.CheckOwnerID(c.Owner.ID); err != nil {
		return nil, invalid("create_owner", err)
	}
	return c, nil
}

// createSiteCmd registers a site for pageview analytics.
type createSiteCmd struct {
	Site store.Site
}

func (c *createSiteCmd) kind() cmdType { return cmdCreateSite }

// appendCreateSite encodes a CreateSite command.
func appendCreateSite(dst []byte, s *store.Site) []byte {
	return appendCommand(dst, &createSiteCmd{Site: *s})
}

func (c *createSiteCmd) appendPayload(dst []byte) []byte {
	s := &c.Site
	dst = appendString(dst, s.ID)
	dst = appendString(dst, s.Domain)
	dst = appendString(dst, s.Timezone)
	dst = appendString(dst, s.Owner)
	return appendVarints(dst, s.CreatedAt)
}

func decodeCreateSite(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &createSiteCmd{}
	s := &c.Site
	s.ID = r.String()
	s.Domain = r.String()
	s.Timezone = r.String()
	s.Owner = r.String()
	s.CreatedAt = r.Varint()
	if !r.Done() || s.ID == "" || s.Domain == "" {
		return nil, corrupt("create_site")
	}
	if err := store.CheckOwnerID(s.Owner); err != nil {
		return nil, invalid("create_site", err)
	}
	return c, nil
}

// allocBlockCmd hands the next Size IDs of a region's range to the caller.
// Version 1 claimed a slot for a region that had none; version 2 refuses
// an unclaimed region (store.ErrRegionUnclaimed): slots are claimed only
// by claimRegionCmd. Old entries keep their version, so they replay as
// they first applied.
type allocBlockCmd struct {
	Region  string
	Size    uint64
	version byte // as decoded; written as the newest
}

func (c *allocBlockCmd) kind() cmdType { return cmdAllocBlock }

// appendAllocBlock encodes an AllocBlock command.
func appendAllocBlock(dst []byte, region string, size uint64) []byte {
	return appendCommand(dst, &allocBlockCmd{Region: region, Size: size})
}

func (c *allocBlockCmd) appendPayload(dst []byte) []byte {
	dst = appendString(dst, c.Region)
	return appendUvarint(dst, c.Size)
}

func decodeAllocBlock(version byte, b []byte) (command, error) {
	r := newReader(b)
	c := &allocBlockCmd{Region: r.String(), Size: r.Uvarint(), version: version}
	if !r.Done() || c.Region == "" || c.Size == 0 || c.Size > store.RegionSpan {
		return nil, corrupt("alloc_block")
	}
	return c, nil
}

// setSecretCmd fixes the cluster permutation key; the first one wins.
type setSecretCmd struct {
	Key []byte
}

func (c *setSecretCmd) kind() cmdType { return cmdSetSecret }

// appendSetSecret encodes a SetSecret command.
func appendSetSecret(dst []byte, key []byte) []byte {
	return appendCommand(dst, &setSecretCmd{Key: key})
}

func (c *setSecretCmd) appendPayload(dst []byte) []byte { return appendBytes(dst, c.Key) }

func decodeSetSecret(_ byte, b []byte) (command, error) {
	r := newReader(b)
	key := r.Bytes()
	if !r.Done() || len(key) != store.KeySize {
		return nil, corrupt("set_secret")
	}
	return &setSecretCmd{Key: append([]byte(nil), key...)}, nil
}

// setClusterIDCmd names the cluster whose log this is; the first leader of
// a cluster applies it once, and the store keeps the first id.
type setClusterIDCmd struct {
	ID string
}

func (c *setClusterIDCmd) kind() cmdType { return cmdSetClusterID }

// appendSetClusterID encodes a SetClusterID command.
func appendSetClusterID(dst []byte, id string) []byte {
	return appendCommand(dst, &setClusterIDCmd{ID: id})
}

func (c *setClusterIDCmd) appendPayload(dst []byte) []byte { return appendString(dst, c.ID) }

func decodeSetClusterID(_ byte, b []byte) (command, error) {
	r := newReader(b)
	id := r.String()
	if !r.Done() || !validClusterID(id) {
		return nil, corrupt("set_cluster_id")
	}
	return &setClusterIDCmd{ID: id}, nil
}

// validClusterID accepts 1 to store.MaxClusterIDLen bytes of [0-9a-z-].
func validClusterID(id string) bool {
	if id == "" || len(id) > store.MaxClusterIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-') {
			return false
		}
	}
	return true
}

// claimRegionCmd gives a region a slot of the ID space (`waymark regions
// add`); a region that has one keeps it.
type claimRegionCmd struct {
	Region string
}

func (c *claimRegionCmd) kind() cmdType { return cmdClaimRegion }

// appendClaimRegion encodes a ClaimRegion command.
func appendClaimRegion(dst []byte, region string) []byte {
	return appendCommand(dst, &claimRegionCmd{Region: region})
}

func (c *claimRegionCmd) appendPayload(dst []byte) []byte { return appendString(dst, c.Region) }

func decodeClaimRegion(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &claimRegionCmd{Region: r.String()}
	if !r.Done() || store.CheckRegionName(c.Region) != nil {
		return nil, corrupt("claim_region")
	}
	return c, nil
}

// maxExpirePerEntry bounds the records one expiry entry deletes, so one
// entry stays a small batch however many records are due.
const maxExpirePerEntry = 4096

// expireIdempotencyCmd deletes idempotency records created at or before
// Cutoff (ms since the epoch). The leader chooses the cutoff from its own
// clock, so every replica deletes exactly the same records.
type expireIdempotencyCmd struct {
	Cutoff int64
	Limit  uint64
}

func (c *expireIdempotencyCmd) kind() cmdType { return cmdExpireIdempotency }

// appendExpireIdempotency encodes an ExpireIdempotency command.
func appendExpireIdempotency(dst []byte, cutoff int64, limit uint64) []byte {
	return appendCommand(dst, &expireIdempotencyCmd{Cutoff: cutoff, Limit: limit})
}

func (c *expireIdempotencyCmd) appendPayload(dst []byte) []byte {
	dst = appendVarints(dst, c.Cutoff)
	return appendUvarint(dst, c.Limit)
}

func decodeExpireIdempotency(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &expireIdempotencyCmd{Cutoff: r.Varint(), Limit: r.Uvarint()}
	if !r.Done() || c.Limit == 0 || c.Limit > maxExpirePerEntry {
		return nil, corrupt("expire_idempotency")
	}
	return c, nil
}
