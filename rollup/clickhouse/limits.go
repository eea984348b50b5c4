package clickhouse

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxClickCodes bounds the codes of one AllTimeClicks call (the length
// of its IN list).
const MaxClickCodes = 1000

// AllTimeClicks returns the all-time non-bot clicks of each of codes,
// the number a click limit is checked against: the clicks held (FROM
// events FINAL, each record once) plus those of the raw days retention
// dropped (retired_clicks), as LinkOverview's all-time figure. A code
// without any click is absent. At most MaxClickCodes codes.
func (b *Backend) AllTimeClicks(codes []string) (map[string]int64, error) {
	if len(codes) == 0 {
		return map[string]int64{}, nil
	}
	if len(codes) > MaxClickCodes {
		return nil, fmt.Errorf("BUG: AllTimeClicks of %d codes; at most %d", len(codes), MaxClickCodes)
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	quoted := make([]string, len(codes))
	for i, c := range codes {
		quoted[i] = String(c)
	}
	in := "(" + strings.Join(quoted, ", ") + ")"
	res, err := b.c.Query(ctx, "SELECT hex(code), sum(n) FROM ("+
		"SELECT code, count() AS n FROM events FINAL WHERE site = '' AND code IN "+in+" AND "+kindClick+" AND "+notBot+" GROUP BY code"+
		" UNION ALL SELECT code, sum(clicks) AS n FROM retired_clicks FINAL WHERE code IN "+in+" GROUP BY code"+
		") GROUP BY code")
	if err != nil {
		return nil, fmt.Errorf("cannot read all-time clicks: %w", err)
	}
	out := make(map[string]int64, len(res.Data))
	for _, raw := range res.Data {
		row := rawRow(raw)
		if len(row) != 2 {
			return nil, fmt.Errorf("cannot read all-time clicks: %d columns", len(row))
		}
		// hex: 18.16's JSON escapes "/" (a domain's link ids) as "\/".
		h, err1 := row[0].str()
		code, err3 := hex.DecodeString(h)
		n, err2 := row[1].int()
		if err := firstErr([]error{err1, err2, err3}); err != nil {
			return nil, fmt.Errorf("cannot read all-time clicks: %w", err)
		}
		out[string(code)] = n
	}
	return out, nil
}
