package ingest

import "github.com/valyala/fasthttp"

// Privacy signals. A browser that sends "DNT: 1" (Do Not Track) or
// "Sec-GPC: 1" (Global Privacy Control) has asked not to be tracked. For
// site events (/api/event, the tracker a site owner embeds) Waymark honours
// that by default: the event is not stored, the answer is still 202 so the
// tracker never retries, X-Waymark-Dropped says "dnt", and
// waymark_ingest_dropped_total{reason="dnt"} counts it. A site whose owner
// set honor_dnt to false (store.Site.IgnoreDNT) keeps such events.
//
// Clicks on short links are not site events and are left alone: the
// redirect is the service the visitor asked for, and its click record is
// the link owner's aggregate count (no cookie, no IP, a visitor hash with a
// daily salt), not tracking on a third-party page. CaptureClick therefore
// never looks at these headers.

// DropDNT is the drop reason for an event skipped because of DNT or GPC.
const DropDNT = "dnt"

var (
	headerDNT    = []byte("DNT")
	headerSecGPC = []byte("Sec-GPC")
)

// privacySignal reports whether the request carries DNT: 1 or Sec-GPC: 1.
// Both headers define "1" as their only opt-out value; anything else
// (DNT: 0, an absent header) is no signal.
func privacySignal(h *fasthttp.RequestHeader) bool {
	return isOne(h.PeekBytes(headerDNT)) || isOne(h.PeekBytes(headerSecGPC))
}

func isOne(v []byte) bool { return len(v) == 1 && v[0] == '1' }

// skipForPrivacy reports whether a site event must be dropped because the
// browser sent a privacy signal the site honours, and counts the drop.
// ignore is the site's IgnoreDNT.
func (p *Pipeline) skipForPrivacy(ctx *fasthttp.RequestCtx, ignore bool, reasons *dropReasonSet) bool {
	if ignore || !privacySignal(&ctx.Request.Header) {
		return false
	}
	p.m.drop(DropDNT)
	reasons.add(DropDNT)
	return true
}
