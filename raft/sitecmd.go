package raft

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/store"
)

// updateSiteCmd edits a site: its time zone, whether DNT/GPC are ignored,
// and one goal added or removed. It carries the edit, not the new record,
// so two owners' concurrent goal changes both survive: the FSM applies
// each to the site as the log orders them.
type updateSiteCmd struct {
	Patch store.SitePatch
}

func (c *updateSiteCmd) kind() cmdType { return cmdUpdateSite }

// appendUpdateSite encodes an UpdateSite command.
func appendUpdateSite(dst []byte, p *store.SitePatch) []byte {
	return appendCommand(dst, &updateSiteCmd{Patch: *p})
}

// Bits of the UpdateSite field mask. Version 1 payload:
//
//	site id, owner        strings ("" owner = operator edit)
//	mask                  byte
//	timezone              string, if sitePatchTimezone
//	ignore DNT            byte 0 or 1, if sitePatchIgnoreDNT
//	goal to add           id, event name, page path, display name, if sitePatchAddGoal
//	goal to delete        string (goal id), if sitePatchDeleteGoal
const (
	sitePatchTimezone byte = 1 << iota
	sitePatchIgnoreDNT
	sitePatchAddGoal
	sitePatchDeleteGoal
	sitePatchKnown = sitePatchTimezone | sitePatchIgnoreDNT | sitePatchAddGoal | sitePatchDeleteGoal
)

func (c *updateSiteCmd) appendPayload(dst []byte) []byte {
	p := &c.Patch
	dst = appendString(dst, p.SiteID)
	dst = appendString(dst, p.Owner)
	var mask byte
	if p.SetTimezone {
		mask |= sitePatchTimezone
	}
	if p.SetIgnoreDNT {
		mask |= sitePatchIgnoreDNT
	}
	if p.AddGoal != nil {
		mask |= sitePatchAddGoal
	}
	if p.DeleteGoal != "" {
		mask |= sitePatchDeleteGoal
	}
	dst = append(dst, mask)
	if p.SetTimezone {
		dst = appendString(dst, p.Timezone)
	}
	if p.SetIgnoreDNT {
		dst = append(dst, boolByte(p.IgnoreDNT))
	}
	if p.AddGoal != nil {
		dst = store.AppendGoal(dst, p.AddGoal)
	}
	if p.DeleteGoal != "" {
		dst = appendString(dst, p.DeleteGoal)
	}
	return dst
}

// decodeUpdateSite reads an UpdateSite payload and checks every field with
// the store's own rules (SitePatch.Check), so a committed entry that
// decodes can only be refused for what the site holds (unknown site,
// clashing goal, too many goals), never for its own bytes.
func decodeUpdateSite(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &updateSiteCmd{}
	p := &c.Patch
	p.SiteID = r.String()
	p.Owner = r.String()
	mask := r.Byte()
	if mask&^sitePatchKnown != 0 {
		r.Fail()
	}
	if p.SetTimezone = mask&sitePatchTimezone != 0; p.SetTimezone {
		p.Timezone = r.String()
	}
	if p.SetIgnoreDNT = mask&sitePatchIgnoreDNT != 0; p.SetIgnoreDNT {
		p.IgnoreDNT = r.bool()
	}
	if mask&sitePatchAddGoal != 0 {
		p.AddGoal = &store.Goal{}
		r.Goal(p.AddGoal)
	}
	if mask&sitePatchDeleteGoal != 0 {
		if p.DeleteGoal = r.String(); p.DeleteGoal == "" {
			r.Fail()
		}
	}
	if !r.Done() || p.Check() != nil {
		return nil, corrupt("update_site")
	}
	return c, nil
}

func (c *updateSiteCmd) apply(a *applier, _ uint64, res *applyResult) {
	s, err := a.b.UpdateSite(&c.Patch)
	if err != nil {
		a.reject(res, err)
		return
	}
	res.Site = &s
	a.sites = append(a.sites, s)
}

// UpdateSite applies an edit of a site's settings or goals and returns the
// site as stored, with the log index of the edit. Another owner's or an
// unknown site fails with store.ErrNotFound (as does deleting an unknown
// goal), a clashing goal with store.ErrGoalExists, the 101st goal with
// store.ErrTooManyGoals, bad fields with store.ErrInvalidSiteEdit (checked
// here first, so nothing reaches the log).
func (n *Node) UpdateSite(ctx context.Context, p *store.SitePatch) (store.Site, uint64, error) {
	if err := p.Check(); err != nil {
		return store.Site{}, 0, fmt.Errorf("cannot update site %q: %w", p.SiteID, err)
	}
	res, err := n.apply(ctx, appendUpdateSite(nil, p))
	if err != nil {
		return store.Site{}, 0, err
	}
	if res.Site == nil {
		return store.Site{}, res.Index, fmt.Errorf("cannot read the edited site %q from the answer: %w", p.SiteID, store.ErrUnknownOutcome)
	}
	return *res.Site, res.Index, nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// bool reads a byte that must be 0 or 1.
func (r *reader) bool() bool {
	switch r.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.Fail()
	return false
}

// appendSiteFields appends a whole site for a forwarded result.
func appendSiteFields(dst []byte, s *store.Site) []byte {
	dst = appendString(dst, s.ID)
	dst = appendString(dst, s.Domain)
	dst = appendString(dst, s.Timezone)
	dst = appendString(dst, s.Owner)
	dst = appendVarints(dst, s.CreatedAt)
	dst = append(dst, boolByte(s.IgnoreDNT))
	dst = appendUvarint(dst, uint64(len(s.Goals)))
	for i := range s.Goals {
		dst = store.AppendGoal(dst, &s.Goals[i])
	}
	return dst
}

// siteFields reads what appendSiteFields wrote, with the store's checks.
func (r *reader) siteFields(s *store.Site) {
	s.ID = r.String()
	s.Domain = r.String()
	s.Timezone = r.String()
	s.Owner = r.String()
	s.CreatedAt = r.Varint()
	s.IgnoreDNT = r.bool()
	n := r.Uvarint()
	if n > store.MaxGoals {
		r.Fail()
		return
	}
	if n > 0 {
		s.Goals = make([]store.Goal, n)
		for i := range s.Goals {
			r.Goal(&s.Goals[i])
		}
	}
	if s.ID == "" || store.CheckGoals(s.Goals) != nil {
		r.Fail()
	}
}
