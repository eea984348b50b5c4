package node

import (
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/ingest"
)

// Redirect rules (issue 13): the edge evaluates them and asks ingest, its
// peer, what analytics would record of the visitor; the node joins the two.

// onRuleRedirect is the click-capture hook for links with rules, or nil
// with --capture-clicks=false.
func (n *Node) onRuleRedirect() func(*fasthttp.RequestCtx, []byte, uint8) {
	if !n.cfg.CaptureClicks || n.ingest == nil {
		return nil
	}
	return n.ingest.CaptureRuleClick
}

// ruleClassifier hands the edge the ingest pipeline's visit classifier:
// the same user-agent parser and country lookup as the click events.
func (n *Node) ruleClassifier() edge.VisitClassifier {
	if n.ingest == nil {
		return nil
	}
	return n.ingest.Classifier()
}

var _ edge.VisitClassifier = (*ingest.VisitClassifier)(nil)
