package harness

import "fmt"

// Visitor is what makes one visitor distinct to a node behind a trusted
// proxy: its User-Agent and its X-Forwarded-For address.
type Visitor struct {
	UserAgent    []byte
	ForwardedFor []byte
}

// MaxVisitors is the size of the benchmark address range 198.18.0.0/15
// (RFC 2544) that MakeVisitors draws from.
const MaxVisitors = 1 << 17

// MakeVisitors returns n visitors, each with a User-Agent and an address
// no other has. The user agents are real-looking browsers (desktop and
// mobile Chrome, iPhone Safari, Android Chrome) with a version that makes
// each one distinct, so a node that parses or caches per user agent sees n
// of them, and none is taken for a bot.
func MakeVisitors(n int) ([]Visitor, error) {
	if n < 0 || n > MaxVisitors {
		return nil, fmt.Errorf("cannot make %d visitors: at most %d fit 198.18.0.0/15", n, MaxVisitors)
	}
	out := make([]Visitor, n)
	for i := range out {
		ip := uint32(198)<<24 | uint32(18)<<16 | uint32(i)
		out[i] = Visitor{
			UserAgent:    []byte(visitorUserAgent(i)),
			ForwardedFor: fmt.Appendf(nil, "%d.%d.%d.%d", ip>>24, ip>>16&0xff, ip>>8&0xff, ip&0xff),
		}
	}
	return out, nil
}

// visitorUserAgent is distinct for every i: the platform comes from i%4
// and (major, build) from i/4.
func visitorUserAgent(i int) string {
	j := i / 4
	major, build, patch := 110+j%30, j/30, j*7%200
	switch i % 4 {
	case 0:
		return fmt.Sprintf("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.%d.%d Safari/537.36", major, build, patch)
	case 1:
		return fmt.Sprintf("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.%d.%d Safari/537.36", major, build, patch)
	case 2:
		return fmt.Sprintf("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.%d.%d Mobile Safari/537.36", major, build, patch)
	default:
		return fmt.Sprintf("Mozilla/5.0 (iPhone; CPU iPhone OS 17_%d like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.%d Mobile/15E%d Safari/604.1", j%8, j%8, 100+j)
	}
}
