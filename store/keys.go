package store

import (
	"encoding/binary"
	"errors"
	"strings"
)

// Key layout. One leading byte names the table; the rest is the primary key.
// Integers are big-endian so that byte order is numeric order.
const (
	tabCounter     = 'C' // C slot(1) -> next unallocated offset in the slot's range (be64)
	tabSiteDomain  = 'D' // D domain -> site id
	tabHistory     = 'H' // H code 0x00 index(be64) seq(1) -> history record (history.go)
	tabOwnerIndex  = 'I' // I owner 0x00 ^index(be64) code -> empty; newest first
	tabKeyHash     = 'K' // K sha256(api key) -> owner id
	tabLink        = 'L' // L code -> link record (tombstones included)
	tabMeta        = 'M' // M name -> value
	tabOwner       = 'O' // O owner id -> owner record
	tabIdempotency = 'P' // P owner 0x00 key -> idempotency record
	// Q createdAt(be64) owner 0x00 key -> empty: idempotency records by age
	tabIdempotencyByTime = 'Q'
	tabRegion            = 'R' // R region name -> slot(1)
	tabSite              = 'S' // S site id -> site record
	tabBlocklist         = 'B' // B canonical entry (name, address or prefix) -> blocklist record
	tabReport            = 'T' // T id(be64) -> report case record
	tabReportByCode      = 'U' // U code -> id(be64) of the code's open report case
	tabExternalID        = 'X' // X owner 0x00 external_id -> code (bulk create, external.go)
	tabAPIKey            = 'A' // A key id (16 hex) -> API key record (apikey.go)
	tabTagIndex          = 'G' // G owner 0x00 tag 0x00 ^createIndex(be64) code -> empty (tags.go)
	tabDomain            = 'N' // N domain -> custom domain record (domain.go)
	tabOwnerDomain       = 'V' // V owner 0x00 domain -> empty: the owner's domains
	tabShare             = 'Z' // Z 'h' sha256(token) -> share; Z 't' kind target 0x00 id -> hash (share.go)
)

var (
	keyApplied = []byte("Mapplied") // last Raft index applied, be64
	keySecret  = []byte("Msecret")  // permutation key fixed at bootstrap
	keyCluster = []byte("Mcluster") // id of the cluster whose log the store holds
)

func linkKey(dst []byte, code []byte) []byte {
	return append(append(dst, tabLink), code...)
}

// checkOwnerID refuses an owner id that holds the 0x00 separator: "a" and
// "a\x00b" would share the index prefix "Ia\x00" and one owner would list
// the other's links.
func checkOwnerID(owner string) error { return CheckOwnerID(owner) }

// CheckOwnerID refuses an owner id the store cannot index (one holding the
// 0x00 separator). Command decoders call it so such a command is refused
// before it reaches the store, the same way on every replica.
func CheckOwnerID(owner string) error {
	if strings.IndexByte(owner, 0) >= 0 {
		return errors.New("owner id contains a NUL byte")
	}
	return nil
}

func ownerIndexPrefix(owner string) []byte {
	k := make([]byte, 0, len(owner)+2)
	k = append(k, tabOwnerIndex)
	k = append(k, owner...)
	return append(k, 0)
}

func ownerIndexKey(owner string, index uint64, code string) []byte {
	k := ownerIndexPrefix(owner)
	k = binary.BigEndian.AppendUint64(k, ^index)
	return append(k, code...)
}

func keyHashKey(h KeyHash) []byte { return append([]byte{tabKeyHash}, h[:]...) }

func ownerKey(id string) []byte { return append([]byte{tabOwner}, id...) }

func idempotencyKey(owner, key string) []byte {
	k := make([]byte, 0, len(owner)+len(key)+2)
	k = append(k, tabIdempotency)
	k = append(k, owner...)
	k = append(k, 0)
	return append(k, key...)
}

func siteKey(id string) []byte { return append([]byte{tabSite}, id...) }

func siteDomainKey(domain string) []byte { return append([]byte{tabSiteDomain}, domain...) }

func regionKey(name string) []byte { return append([]byte{tabRegion}, name...) }

func counterKey(slot int) []byte { return []byte{tabCounter, byte(slot)} }

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
