package edge

import "bytes"

// crawlerTokens are the user-agent tokens of the link unfurlers that get
// a link's preview page (preview.go) instead of its redirect. Keep the
// list short and to apps that render Open Graph or Twitter cards; a token
// matches anywhere in the user agent, case as the app sends it. Each has
// a real user agent in gates_test.go, and the analytics must mark that
// user agent bot (ingest's crawler detection): a preview fetch is counted
// as a bot click, never as a person's.
var crawlerTokens = [][]byte{
	[]byte("facebookexternalhit"), // Facebook, Messenger, Instagram
	[]byte("Facebot"),
	[]byte("Twitterbot"), // X / Twitter
	[]byte("Slackbot"),   // Slackbot-LinkExpanding
	[]byte("LinkedInBot"),
	[]byte("Discordbot"),
	[]byte("WhatsApp"),
	[]byte("TelegramBot"),
	[]byte("SkypeUriPreview"), // Skype, Teams
	[]byte("redditbot"),
	[]byte("Mastodon/"), // "http.rb/5.x (Mastodon/4.x; +https://instance/)"
}

// crawlerPairs marks the first two bytes of every token: isCrawler looks
// at the rest only where a marked pair starts, so a browser's user agent
// costs one pass of table lookups instead of a search per token.
var crawlerPairs = func() *[1 << 16 / 64]uint64 {
	var m [1 << 16 / 64]uint64
	for _, t := range crawlerTokens {
		if len(t) < 2 {
			panic("BUG: crawler token shorter than two bytes")
		}
		p := uint16(t[0])<<8 | uint16(t[1])
		m[p/64] |= 1 << (p % 64)
	}
	return &m
}()

// isCrawler reports whether ua belongs to a link unfurler. It does not
// allocate, and runs only for links with a preview.
func isCrawler(ua []byte) bool {
	var p uint16 // the two bytes ending at i
	for i, c := range ua {
		p = p<<8 | uint16(c)
		if i == 0 || crawlerPairs[p>>6]&(1<<(p&63)) == 0 {
			continue
		}
		for _, t := range crawlerTokens {
			if bytes.HasPrefix(ua[i-1:], t) {
				return true
			}
		}
	}
	return false
}
