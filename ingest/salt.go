package ingest

import (
	"crypto/rand"
	"sync"
	"time"
)

// SaltSource gives the secret salt of a UTC day for visitor hashing.
// Implementations must keep salts in memory only and must give every node
// of a cluster the same salt for the same day, so one visitor seen in two
// regions is one visitor.
type SaltSource interface {
	Salt(day time.Time) [16]byte
}

// DaySalt is the salt of one UTC day, Day being the day number since the
// Unix epoch. The node exchanges these over gossip.
type DaySalt struct {
	Day  int64
	Salt [16]byte
}

// LocalSalts keeps random salts for today and yesterday (UTC) in memory
// and forgets older ones, so a visitor hash cannot be linked across days
// and nothing survives a restart. A salt is created the first time a day
// is asked for, unless one was adopted from a peer with Adopt.
type LocalSalts struct {
	now   func() time.Time
	mu    sync.Mutex
	salts map[int64][16]byte
}

// NewLocalSalts returns an empty salt store using now as its clock.
func NewLocalSalts(now func() time.Time) *LocalSalts {
	if now == nil {
		now = time.Now
	}
	return &LocalSalts{now: now, salts: make(map[int64][16]byte, 3)}
}

func dayNumber(t time.Time) int64 {
	ms := t.UnixMilli()
	d := ms / 86_400_000
	if ms < 0 && ms%86_400_000 != 0 {
		d--
	}
	return d
}

// Salt returns the salt of the UTC day containing day.
func (s *LocalSalts) Salt(day time.Time) [16]byte {
	d := dayNumber(day)
	s.mu.Lock()
	defer s.mu.Unlock()
	if salt, ok := s.salts[d]; ok {
		return salt
	}
	var salt [16]byte
	_, _ = rand.Read(salt[:])
	s.salts[d] = salt
	s.pruneLocked()
	return salt
}

// Adopt installs a salt learned from a peer, replacing the local one, if
// the day is still kept (today or yesterday). The node resolves which
// peer's salt wins; LocalSalts just stores it.
func (s *LocalSalts) Adopt(ds DaySalt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.salts[ds.Day] = ds.Salt
	s.pruneLocked()
}

// Known returns the salts currently kept, for sharing with peers.
func (s *LocalSalts) Known() []DaySalt {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked()
	out := make([]DaySalt, 0, len(s.salts))
	for d, salt := range s.salts {
		out = append(out, DaySalt{Day: d, Salt: salt})
	}
	return out
}

// pruneLocked forgets salts older than yesterday. Future days (a peer with
// a slightly fast clock) are kept.
func (s *LocalSalts) pruneLocked() {
	today := dayNumber(s.now())
	for d := range s.salts {
		if d < today-1 {
			delete(s.salts, d)
		}
	}
}
