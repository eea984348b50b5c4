package ingest

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// SaltSource gives the secret salt of a UTC day for visitor hashing.
// Implementations must give every node of a cluster the same salt for the
// same day, so one visitor seen in two regions is one visitor, and must
// keep no salt of a day older than yesterday anywhere: not in memory, not
// on disk.
type SaltSource interface {
	Salt(day time.Time) [16]byte
}

// DaySalt is the salt of one UTC day, Day being the day number since the
// Unix epoch, and when it was made (Unix ms, on the node that made it).
// The node exchanges these over gossip.
type DaySalt struct {
	Day     int64
	Created int64
	Salt    [16]byte
}

// wins reports whether a should replace b as the salt of their day: the
// one made first wins, ties by value. A salt a node makes after a restart
// is always newer than the one the cluster has been using since the day
// began, so it can never take over.
func (a DaySalt) wins(b DaySalt) bool {
	if a.Created != b.Created {
		return a.Created < b.Created
	}
	return bytes.Compare(a.Salt[:], b.Salt[:]) < 0
}

// LocalSalts keeps the salts of today and yesterday (UTC), as Plausible
// does: in memory and, when opened with a path, in one file (mode 0600,
// replaced atomically and fsynced on every change), so a restart keeps
// hashing a visitor the same way. A salt is dropped, from memory and the
// file, once its day is older than yesterday: no salt older than 48 hours
// exists anywhere. A salt is made the first time a day is asked for,
// unless one came from a peer through Merge.
type LocalSalts struct {
	now  func() time.Time
	rand io.Reader
	path string // "" keeps salts in memory only
	log  *slog.Logger

	mu    sync.Mutex
	salts map[int64]DaySalt
	// held is non-nil while the store waits for the cluster's salt (see
	// HoldForPeers); it is closed when the wait ends.
	held      chan struct{}
	holdUntil time.Time // real time: the wait is real, whatever now says
	holdLen   time.Duration
}

// SaltOptions configures OpenLocalSalts. Zero values take the defaults.
type SaltOptions struct {
	Path   string           // salt file; "" keeps salts in memory only
	Now    func() time.Time // default time.Now
	Rand   io.Reader        // default crypto/rand
	Logger *slog.Logger
}

// NewLocalSalts returns an empty in-memory salt store using now as its
// clock.
func NewLocalSalts(now func() time.Time) *LocalSalts {
	s, _ := OpenLocalSalts(SaltOptions{Now: now})
	return s
}

// OpenLocalSalts loads the salts in opts.Path that are still kept (a
// leftover temporary file is removed, expired days are dropped from the
// file) and returns the store. A damaged salt file is removed: the salts
// in it cannot be trusted, and keeping them would keep them past 48 hours.
func OpenLocalSalts(opts SaltOptions) (*LocalSalts, error) {
	s := &LocalSalts{now: opts.Now, rand: opts.Rand, path: opts.Path, log: opts.Logger, salts: make(map[int64]DaySalt, 3)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.path == "" {
		return s, nil
	}
	if err := os.Remove(s.path + ".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cannot remove leftover salt file: %w", err)
	}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read salt file: %w", err)
	}
	loaded, err := parseSaltFile(b)
	if err != nil {
		s.log.Warn("salt file damaged; removing it and starting without salts", "path", s.path, "err", err)
		if err := removeSynced(s.path); err != nil {
			return nil, err
		}
		return s, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ds := range loaded {
		s.salts[ds.Day] = ds
	}
	if s.pruneLocked() || len(s.salts) != len(loaded) {
		s.persistLocked()
	}
	return s, nil
}

func dayNumber(t time.Time) int64 {
	ms := t.UnixMilli()
	d := ms / 86_400_000
	if ms < 0 && ms%86_400_000 != 0 {
		d--
	}
	return d
}

// Salt returns the salt of the UTC day containing day. While the store
// holds for the cluster's salt (HoldForPeers) and has none for that day,
// it waits for the hold to end before making one.
func (s *LocalSalts) Salt(day time.Time) [16]byte {
	d := dayNumber(day)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if ds, ok := s.salts[d]; ok {
			return ds.Salt
		}
		if s.held == nil {
			break
		}
		ch, until := s.held, s.holdUntil
		s.mu.Unlock()
		t := time.NewTimer(time.Until(until))
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		s.mu.Lock()
		if s.held == ch && !time.Now().Before(until) {
			s.log.Warn("no salt for today from the cluster in time; making a fresh one (the cluster's, made earlier, replaces it once gossip reaches a peer; visitors hashed until then count as new)",
				"waited", s.holdLen)
			s.endHoldLocked()
		}
	}
	return s.makeLocked(d).Salt
}

// makeLocked makes, keeps and persists a fresh salt for day d.
func (s *LocalSalts) makeLocked(d int64) DaySalt {
	ds := DaySalt{Day: d, Created: s.now().UnixMilli()}
	if _, err := io.ReadFull(s.rand, ds.Salt[:]); err != nil {
		panic("BUG: cannot read random bytes for a salt: " + err.Error())
	}
	s.salts[d] = ds
	s.pruneLocked()
	s.persistLocked()
	return ds
}

// Ensure makes today's salt if there is none, unless the store is holding
// for the cluster's. It never blocks; gossip calls it before sharing.
func (s *LocalSalts) Ensure(now time.Time) {
	d := dayNumber(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.salts[d]; ok || s.held != nil {
		return
	}
	s.makeLocked(d)
}

// Merge takes a peer's salt for a day still kept (yesterday, today, or
// tomorrow for a peer with a fast clock) if this store has none for that
// day or the peer's wins (made earlier; ties by value). It reports
// whether it changed anything. Today's salt arriving ends a hold.
func (s *LocalSalts) Merge(ds DaySalt) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	today := dayNumber(s.now())
	if ds.Day < today-1 || ds.Day > today+1 {
		return false
	}
	if mine, ok := s.salts[ds.Day]; ok && !ds.wins(mine) {
		return false
	}
	s.salts[ds.Day] = ds
	s.persistLocked()
	if ds.Day == today && s.held != nil {
		s.endHoldLocked()
	}
	return true
}

// HoldForPeers makes Salt wait up to max for a salt from the cluster
// (Merge) instead of making a fresh one, if there is no salt for today
// yet. A node that lost its salt file and restarts mid-day calls it before
// it accepts events, so it goes on with the salt the cluster has been
// using. It reports whether the store is now holding.
func (s *LocalSalts) HoldForPeers(max time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.salts[dayNumber(s.now())]; ok || s.held != nil {
		return s.held != nil
	}
	s.held, s.holdUntil, s.holdLen = make(chan struct{}), time.Now().Add(max), max
	return true
}

// Release ends a hold early (shutdown): a waiting Salt makes a fresh salt.
func (s *LocalSalts) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil {
		s.endHoldLocked()
	}
}

// Holding reports whether the store still waits for the cluster's salt.
func (s *LocalSalts) Holding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held != nil
}

func (s *LocalSalts) endHoldLocked() {
	close(s.held)
	s.held = nil
}

// Known returns the salts currently kept, for sharing with peers.
func (s *LocalSalts) Known() []DaySalt {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pruneLocked() {
		s.persistLocked()
	}
	out := make([]DaySalt, 0, len(s.salts))
	for _, ds := range s.salts {
		out = append(out, ds)
	}
	return out
}

// Prune drops the salts of days older than yesterday, from memory and the
// file. The node calls it at every UTC midnight so an idle node forgets
// on time too.
func (s *LocalSalts) Prune() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pruneLocked() {
		s.persistLocked()
	}
}

// pruneLocked forgets salts older than yesterday and reports whether it
// dropped any. Future days (a peer with a slightly fast clock) are kept.
func (s *LocalSalts) pruneLocked() bool {
	today := dayNumber(s.now())
	dropped := false
	for d := range s.salts {
		if d < today-1 {
			delete(s.salts, d)
			dropped = true
		}
	}
	return dropped
}

// persistLocked replaces the salt file with the salts kept now. A failure
// is logged: hashing goes on from memory, and only a restart would then
// split visits.
func (s *LocalSalts) persistLocked() {
	if s.path == "" {
		return
	}
	var err error
	if len(s.salts) == 0 {
		err = removeSynced(s.path)
	} else {
		err = writeSaltFile(s.path, s.salts)
	}
	if err != nil {
		s.log.Error("cannot write salt file; a restart will make new salts", "path", s.path, "err", err)
	}
}

// Salt file layout: magic "WMSL" | version byte (1) | count byte |
// count × (day int64 | created Unix ms int64 | salt 16 bytes), big endian
// | CRC32C of everything before it (uint32, little endian).
const (
	saltMagic      = "WMSL"
	saltVersion    = 1
	saltEntryBytes = 8 + 8 + 16
)

func writeSaltFile(path string, salts map[int64]DaySalt) error {
	b := append([]byte(saltMagic), saltVersion, byte(len(salts)))
	for _, ds := range salts {
		b = binary.BigEndian.AppendUint64(b, uint64(ds.Day))
		b = binary.BigEndian.AppendUint64(b, uint64(ds.Created))
		b = append(b, ds.Salt[:]...)
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	// The mode of a file that already existed is not changed by OpenFile.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

func parseSaltFile(b []byte) ([]DaySalt, error) {
	if len(b) < len(saltMagic)+2+4 || string(b[:4]) != saltMagic || b[4] != saltVersion {
		return nil, errors.New("not a salt file")
	}
	n := int(b[5])
	if len(b) != 6+n*saltEntryBytes+4 {
		return nil, errors.New("wrong length")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, errors.New("checksum mismatch")
	}
	out := make([]DaySalt, n)
	for i := range out {
		e := body[6+i*saltEntryBytes:]
		out[i].Day = int64(binary.BigEndian.Uint64(e))
		out[i].Created = int64(binary.BigEndian.Uint64(e[8:]))
		copy(out[i].Salt[:], e[16:32])
	}
	return out, nil
}

func removeSynced(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("cannot remove salt file: %w", err)
	}
	return syncDir(filepath.Dir(path))
}
