package store

import (
	"cmp"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
)

// MaxTimezoneLen bounds a site's time zone name; the longest IANA name is
// 32 bytes.
const MaxTimezoneLen = 64

// SitePatch is an edit of a site: its settings and one goal added or
// removed. Only the Set* fields, AddGoal and DeleteGoal are applied. An
// empty Owner is an operator edit that any site accepts; otherwise the
// site must belong to Owner.
type SitePatch struct {
	SiteID       string
	Owner        string
	SetTimezone  bool
	Timezone     string // checked against the IANA database by the API
	SetIgnoreDNT bool
	IgnoreDNT    bool
	AddGoal      *Goal  // normalised (NormalizeGoal) with its id
	DeleteGoal   string // goal id
}

// Empty reports whether p changes nothing.
func (p *SitePatch) Empty() bool {
	return !p.SetTimezone && !p.SetIgnoreDNT && p.AddGoal == nil && p.DeleteGoal == ""
}

// Check reports why p can never apply, whatever the site holds, wrapping
// ErrInvalidSiteEdit. The raft command decoder refuses such a patch.
func (p *SitePatch) Check() error {
	switch {
	case p.SiteID == "":
		return fmt.Errorf("%w: no site id", ErrInvalidSiteEdit)
	case p.Empty():
		return fmt.Errorf("%w: the edit changes nothing", ErrInvalidSiteEdit)
	case p.SetTimezone && (p.Timezone == "" || len(p.Timezone) > MaxTimezoneLen || !utf8.ValidString(p.Timezone)):
		return fmt.Errorf("%w: time zone %q", ErrInvalidSiteEdit, p.Timezone)
	case p.DeleteGoal != "" && !ValidGoalID(p.DeleteGoal):
		return fmt.Errorf("%w: goal id %q", ErrInvalidSiteEdit, p.DeleteGoal)
	case p.AddGoal != nil:
		return CheckGoal(p.AddGoal)
	}
	return nil
}

// Apply edits s in place. It is deterministic, as an FSM step must be:
// a goal that clashes gives ErrGoalExists, the 101st ErrTooManyGoals, an
// unknown goal to delete ErrNotFound, and s is then unchanged.
func (p *SitePatch) Apply(s *Site) error {
	if err := p.Check(); err != nil {
		return err
	}
	goals := s.Goals
	if p.DeleteGoal != "" {
		i := slices.IndexFunc(goals, func(g Goal) bool { return g.ID == p.DeleteGoal })
		if i < 0 {
			return fmt.Errorf("goal %q: %w", p.DeleteGoal, ErrNotFound)
		}
		goals = slices.Delete(slices.Clone(goals), i, i+1)
	}
	if g := p.AddGoal; g != nil {
		if err := goalConflict(goals, g); err != nil {
			return err
		}
		if len(goals) >= MaxGoals {
			return fmt.Errorf("%w (%d)", ErrTooManyGoals, MaxGoals)
		}
		goals = append(slices.Clip(goals), *g)
	}
	if len(goals) == 0 {
		goals = nil // one encoding: no goals is nil, as the decoder gives
	}
	s.Goals = goals
	if p.SetTimezone {
		s.Timezone = p.Timezone
	}
	if p.SetIgnoreDNT {
		s.IgnoreDNT = p.IgnoreDNT
	}
	return nil
}

// Site reads a site as of the batch.
func (b *Batch) Site(id string, s *Site) (bool, error) {
	found, err := get(b.b, siteKey(id), func(v []byte) error { return DecodeSite(v, s) })
	if err != nil {
		return false, fmt.Errorf("cannot read site %q: %w", id, err)
	}
	return found, nil
}

// UpdateSite applies p to the stored site and returns the new record.
// Another owner's site reports ErrNotFound, never a permission error. The
// domain and its index never change here.
func (b *Batch) UpdateSite(p *SitePatch) (Site, error) {
	var s Site
	found, err := b.Site(p.SiteID, &s)
	if err != nil {
		return Site{}, err
	}
	if !found || (p.Owner != "" && p.Owner != s.Owner) {
		return Site{}, fmt.Errorf("cannot update site %q: %w", p.SiteID, ErrNotFound)
	}
	if err := p.Apply(&s); err != nil {
		return Site{}, fmt.Errorf("cannot update site %q: %w", p.SiteID, err)
	}
	if err := b.set(siteKey(s.ID), AppendSite(nil, &s)); err != nil {
		return Site{}, fmt.Errorf("cannot write site %q: %w", s.ID, err)
	}
	return s, nil
}

// OwnerSites returns the sites of one owner, oldest first. It scans the
// site table, which every node already holds in memory in full, so the
// cost is that of Sites.
func (s *Store) OwnerSites(owner string) ([]Site, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabSite}, UpperBound: []byte{tabSite + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot list sites: %w", err)
	}
	defer it.Close()
	var sites []Site
	for valid := it.First(); valid; valid = it.Next() {
		var st Site
		if err := DecodeSite(it.Value(), &st); err != nil {
			return nil, fmt.Errorf("cannot list sites: %w", err)
		}
		if st.Owner == owner {
			sites = append(sites, st)
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cannot list sites: %w", err)
	}
	slices.SortFunc(sites, func(a, b Site) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return sites, nil
}
