package clickhouse

import (
	"context"
	"log/slog"
	"strings"
)

// The marker cache: a question reads every held unit's marker and dirty
// mark of its site (or of the link hours) first, which at 30M events was
// about half of a warm answer. Those rows change only by an INSERT (a
// materializer's markers, a late batch's marks, from any aggregator) or a
// partition drop, and each of those changes the set of active parts of
// the tables read, which ClickHouse lists in system.parts. The link day
// markers and the site day marks are read the same way. So the answer
// of a marker read is kept under a print of those parts (count, and the
// sum and xor of their names' hashes) and used again while the print is
// the same; the print is read before the markers, so a part that becomes
// active between the two reads makes the next print differ and the
// markers read again. A merge also changes the print: it costs a read,
// never a stale answer. Where system.parts cannot be read (a restricted
// user), every question reads its markers as before.

// markerCacheBytes bounds the cached marker answers (about 15 bytes a
// unit: a site's 90 days are 32 KB).
const markerCacheBytes = 16 << 20

// markerKey is one marker read (its database and SQL) under the print of
// its tables' parts.
type markerKey struct {
	sql, print string
}

type markerCache = rowCache[markerKey, byte]

func newMarkerCache(m rowCacheMetrics) *markerCache {
	return newRowCache(markerCacheBytes, m, func(k markerKey, body []byte) int { return 64 + len(k.sql) + len(k.print) + len(body) })
}

// partsPrint is the print of the active parts of tables; ok false when
// system.parts cannot be read.
func (c *Client) partsPrint(ctx context.Context, tables ...string) (string, bool) {
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = String(t)
	}
	body, err := c.QueryRowBinary(ctx, "SELECT count(), sum(cityHash64(name)), groupBitXor(cityHash64(name)) FROM system.parts WHERE database = "+
		String(c.db)+" AND table IN ("+strings.Join(quoted, ", ")+") AND active")
	if err != nil {
		c.printFailed.Do(func() { slog.Warn("cannot read system.parts; questions read their markers every time", "err", err) })
		return "", false
	}
	return string(body), true
}

// cachedRowBinary is the RowBinary answer of sql, which reads only
// tables: the cached one while their parts are unchanged, else read and
// cached.
func (c *Client) cachedRowBinary(ctx context.Context, sql string, tables ...string) ([]byte, error) {
	print, ok := c.partsPrint(ctx, tables...)
	if !ok {
		return c.QueryRowBinary(ctx, sql)
	}
	k := markerKey{c.db + "\x00" + sql, print}
	if body, ok := c.markerRows.get(k); ok {
		return body, nil
	}
	body, err := c.QueryRowBinary(ctx, sql)
	if err == nil {
		c.markerRows.put(k, body)
	}
	return body, err
}
