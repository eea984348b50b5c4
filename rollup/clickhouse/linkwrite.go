package clickhouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
)

// writeLinkRows writes the link rows of hours [h0, h1) under version:
// the clicks grouped on the server, the visitor ids of each group
// encoded into a visitor set here (linkset.go), inserted as RowBinary.
func (b *Backend) writeLinkRows(ctx context.Context, h0, h1 int64, version uint64) error {
	body, err := b.c.QueryRowBinary(ctx, "SELECT code, tupleElement(dv, 1) AS d, tupleElement(dv, 2) AS v, toUInt32(toStartOfHour(time)) AS hr, countIf("+
		notBot+"), countIf("+isBot+"), groupUniqArrayIf(visitor, "+notBot+") FROM events FINAL ARRAY JOIN "+linkDimTuples()+
		" AS dv WHERE "+linkWhereAny+" AND "+timeIn(h0*msPerHour, h1*msPerHour)+" GROUP BY code, d, v, hr")
	if err != nil {
		return err
	}
	r := &rbReader{b: body}
	var out []byte
	var ids []uint64
	for len(r.b) > 0 && r.err == nil {
		for range 3 { // code, dim, value: copied as they are
			n := r.uvarint()
			out = binary.AppendUvarint(out, n)
			out = append(out, r.need(int(min(n, uint64(len(r.b)))))...)
		}
		out = binary.LittleEndian.AppendUint32(out, r.u32())
		out = binary.LittleEndian.AppendUint64(out, version)
		out = binary.LittleEndian.AppendUint64(out, r.u64())
		out = binary.LittleEndian.AppendUint64(out, r.u64())
		ids = ids[:0]
		for range r.uvarint() {
			ids = append(ids, r.u64())
		}
		set, err := linkSetOf(ids).appendTo(nil)
		if err != nil {
			return fmt.Errorf("cannot encode link visitors: %w", err)
		}
		out = appendString(out, string(set))
	}
	if r.err != nil {
		return fmt.Errorf("cannot read the link groups: %w", r.err)
	}
	if len(out) == 0 {
		return nil
	}
	return b.c.Insert(ctx, "INSERT INTO link_rows (code, dim, value, hour, version, clicks, bots, visitor_set) FORMAT RowBinary", bytes.NewReader(out), nil)
}
