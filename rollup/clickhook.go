package rollup

import (
	"fmt"

	"github.com/waymark/waymark/ingest"
)

// feedClicks hands the link clicks of the segments an apply is about to
// commit to Config.OnStoredClicks (the node's link.clicked webhook outbox,
// issue 13 point 5). It runs once per apply, after duplicates are sorted
// out and before the commit: a hook that fails fails the apply, so the
// shipper sends the segments again and no click is lost to the webhooks
// (a commit that fails after the hook stored them repeats them; each
// click carries its event id for dedup). Without a hook it does nothing.
func (a *Aggregator) feedClicks(stored []*ingest.Event) error {
	if a.cfg.OnStoredClicks == nil || len(stored) == 0 {
		return nil
	}
	var clicks []*ingest.Event
	for _, ev := range stored {
		if ev.Kind == ingest.KindClick {
			clicks = append(clicks, ev)
		}
	}
	if len(clicks) == 0 {
		return nil
	}
	if err := a.cfg.OnStoredClicks(clicks); err != nil {
		return fmt.Errorf("cannot hand clicks to the webhook outbox: %w", err)
	}
	return nil
}
