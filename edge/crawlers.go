package edge

import "bytes"

// crawlerTokens are the user-agent tokens of the link unfurlers that get
// a link's preview page (preview.go) instead of its redirect. Keep the
// list short and to apps that render Open Graph or Twitter cards; a token
// matches anywhere in the user agent, case as the app sends it. Each has
// a real user agent in crawlers_test.go.
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
	[]byte("Cardyb"),    // Bluesky's card fetcher
}

// isCrawler reports whether ua belongs to a link unfurler. It does not
// allocate, and runs only for links with a preview.
func isCrawler(ua []byte) bool {
	for _, t := range crawlerTokens {
		if bytes.Contains(ua, t) {
			return true
		}
	}
	return false
}
