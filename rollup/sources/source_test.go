package sources

import "testing"

// Each expectation is worked out by hand. "plausible:" cites a case in
// Plausible's test/plausible/ingestion/source_test.exs (or the examples
// in the moduledoc of lib/plausible/ingestion/source.ex); "data:" reads
// the host's entry in data/referers.txt (the referer-parser database) and
// applies referer-parser's rule (the host or its nearest listed parent
// domain); "overrides:" reads data/overrides.txt; "rule:" applies the rule
// documented on Source.
func TestSourceFromReferrer(t *testing.T) {
	tests := []struct {
		host, want, from string
	}{
		// Search engines.
		{"google.com", "Google", "plausible: known referrer from RefInspector"},
		{"www.google.com", "Google", "data: google.com under search/Google"},
		{"www.google.co.uk", "Google", "data: google.co.uk under search/Google"},
		{"google.de", "Google", "data: google.de under search/Google"},
		{"news.google.com", "Google News", "data: news.google.com is its own search source, Google News (not Google)"},
		{"gemini.google.com", "Google Gemini", "plausible: gemini.google.com is Google Gemini, not Google"},
		{"bing.com", "Bing", "data: bing.com under search/Bing"},
		{"www.bing.com", "Bing", "data"},
		{"ntp.msn.com", "Bing", "overrides: Plausible folds the MSN new-tab page into Bing"},
		{"duckduckgo.com", "DuckDuckGo", "data + overrides: the packaged name DuckDuckGoL, shown as DuckDuckGo"},
		{"search.yahoo.com", "Yahoo!", "data: search.yahoo.com under search/Yahoo!"},
		{"uk.search.yahoo.com", "Yahoo!", "data: parent search.yahoo.com"},
		{"yandex.ru", "Yandex", "data"},
		{"ya.ru", "Yandex", "overrides"},
		{"www.baidu.com", "Baidu", "data"},
		{"baidu.com", "Baidu", "overrides: Plausible maps bare baidu.com to Baidu"},
		{"m.baidu.com", "Baidu", "overrides: parent baidu.com"},
		{"search.brave.com", "Brave", "overrides"},
		{"kagi.com", "Kagi", "plausible: kagi.com referrer is Kagi"},
		{"ecosia.org", "Ecosia", "data"},

		// Social networks.
		{"facebook.com", "Facebook", "data"},
		{"m.facebook.com", "Facebook", "data: parent facebook.com"},
		{"l.facebook.com", "Facebook", "data: parent facebook.com"},
		{"t.co", "X (Twitter)", "plausible: t.co referrer is 'X (Twitter)'"},
		{"twitter.com", "X (Twitter)", "data + overrides: Twitter shown as X (Twitter)"},
		{"mobile.twitter.com", "X (Twitter)", "data: parent twitter.com"},
		{"x.com", "X (Twitter)", "plausible: x.com referrer is X (Twitter)"},
		{"linkedin.com", "LinkedIn", "data"},
		{"www.linkedin.com", "LinkedIn", "data: parent linkedin.com"},
		{"reddit.com", "Reddit", "data"},
		{"old.reddit.com", "Reddit", "data: parent reddit.com"},
		{"instagram.com", "Instagram", "data"},
		{"l.instagram.com", "Instagram", "data: parent instagram.com"},
		{"tiktok.com", "TikTok", "overrides (the current upstream database agrees)"},
		{"www.tiktok.com", "TikTok", "overrides: parent tiktok.com"},
		{"youtube.com", "Youtube", "data: Plausible's spelling is Youtube too"},
		{"m.youtube.com", "Youtube", "data: parent youtube.com"},
		{"youtu.be", "Youtube", "data"},
		{"bsky.app", "Bluesky", "plausible: bsky.app referrer is Bluesky"},
		{"go.bsky.app", "Bluesky", "plausible: go.bsky.app referrer is Bluesky"},
		{"mastodon.social", "Mastodon", "plausible"},
		{"fosstodon.org", "Mastodon", "plausible"},
		{"l.threads.com", "Threads", "plausible: l.threads.com referrer is Threads"},
		{"news.ycombinator.com", "Hacker News", "data"},
		{"github.com", "GitHub", "data"},
		{"vk.com", "Vkontakte", "data"},
		{"t.me", "Telegram", "overrides"},
		{"discord.com", "Discord", "overrides"},
		{"ptb.discord.com", "Discord", "overrides: parent discord.com"},
		{"linktr.ee", "Linktree", "overrides"},

		// Email.
		{"mail.google.com", "Gmail", "data: mail.google.com under email/Gmail"},

		// AI assistants.
		{"chatgpt.com", "ChatGPT", "plausible: chatgpt.com referrer is ChatGPT"},
		{"chat.openai.com", "ChatGPT", "plausible"},
		{"claude.ai", "Claude", "plausible"},
		{"phind.com", "Phind", "plausible"},
		{"copilot.microsoft.com", "Microsoft Copilot", "plausible"},
		{"copilot.com", "Microsoft Copilot", "plausible"},
		{"pplx.ai", "Perplexity", "plausible"},
		{"perplexity.ai", "Perplexity", "overrides"},
		{"www.perplexity.ai", "Perplexity", "overrides: parent perplexity.ai"},

		// Multi-host sources, and look-alikes that are not them.
		{"wikipedia.org", "Wikipedia", "plausible: any wikipedia.org subdomain is Wikipedia"},
		{"www.wikipedia.org", "Wikipedia", "plausible"},
		{"en.wikipedia.org", "Wikipedia", "plausible"},
		{"en.m.wikipedia.org", "Wikipedia", "plausible"},
		{"zu.wikipedia.org", "Wikipedia", "plausible"},
		{"notwikipedia.org", "notwikipedia.org", "plausible: a host that only looks like the suffix"},
		{"officeapps.live.com", "Microsoft 365", "plausible"},
		{"euc-excel.officeapps.live.com", "Microsoft 365", "plausible"},
		{"notofficeapps.live.com", "notofficeapps.live.com", "plausible"},
		{"notgoogle.com", "notgoogle.com", "rule: suffixes match whole labels only"},

		// Unknown hosts are their own source, less www.
		{"www.markosaric.com", "markosaric.com", "plausible: unknown source is stored as the domain name"},
		{"example.com", "example.com", "rule"},
		{"blog.example.com", "blog.example.com", "rule: only a leading www. goes"},
		{"www2.example.com", "www2.example.com", "rule"},
		{"WWW.Example.COM", "Example.COM", "rule: lookups ignore case, an unknown host keeps its own"},
		{"example.com:8443", "example.com", "rule: a port is not part of the host"},
		{"example.com.", "example.com", "rule: nor is a trailing dot"},
		{"GOOGLE.COM", "Google", "rule: lookups ignore case"},
		{"www.google.com:443", "Google", "rule"},

		// Android apps.
		{"android-app://com.reddit.frontpage", "Reddit", "plausible: custom source for the Reddit app"},
		{"android-app://com.facebook.katana", "android-app://com.facebook.katana", "data: the packaged 2014 database does not list the app"},
		{"android-app://com.example.app", "android-app://com.example.app", "plausible: unknown app keeps its android-app:// form"},

		// Direct.
		{"", "", "rule: no referrer and no tag is direct"},
		{".", "", "rule: nothing left of the host"},
	}
	for _, tt := range tests {
		if got := Source(tt.host, ""); got != tt.want {
			t.Errorf("Source(%q, \"\") = %q; want %q (%s)", tt.host, got, tt.want, tt.from)
		}
	}
}

func TestSourceFromUTM(t *testing.T) {
	tests := []struct {
		host, utm, want, from string
	}{
		{"", "google", "Google", "plausible: known source supplied as downcased utm_source"},
		{"", "GOOGLE", "Google", "plausible: known source supplied as uppercased utm_source"},
		{"", "wikipedia", "Wikipedia", "plausible: known custom source supplied as utm_source"},
		{"", "ig", "Instagram", "plausible: known utm_source shorthand"},
		{"", "fb", "Facebook", "overrides"},
		{"", "yt", "Youtube", "overrides"},
		{"", "Adwords", "Google", "overrides (Plausible: Adwords is paid Google)"},
		{"", "fb-ads", "Facebook", "overrides"},
		{"", "twitter", "X (Twitter)", "plausible: acquisition test pairs utm_source twitter with X (Twitter)"},
		{"", "twitter-ads", "X (Twitter)", "plausible: acquisition test pairs twitter-ads with X (Twitter)"},
		{"", "x (twitter)", "X (Twitter)", "rule: a shown name in any case is that name"},
		{"", "duckduckgo", "DuckDuckGo", "overrides"},
		{"", "Reddit-ads", "Reddit", "overrides, case ignored"},
		{"", "newsletter", "newsletter", "rule: an unknown tag is kept as given"},
		{"", "Newsletter-UK", "Newsletter-UK", "rule: and keeps its case"},
		{"", "google.com", "google.com", "rule: tags are matched against names, not hosts, as in Plausible"},
		{"", "perplexity.ai", "Perplexity", "overrides"},
		{"www.google.com", "newsletter", "newsletter", "plausible: utm_source is prioritized over the Referer header"},
		{"bing.com", "Facebook", "Facebook", "plausible: utm_source wins"},
		{"t.co", "", "X (Twitter)", "rule: no tag, the referrer decides"},
	}
	for _, tt := range tests {
		if got := Source(tt.host, tt.utm); got != tt.want {
			t.Errorf("Source(%q, %q) = %q; want %q (%s)", tt.host, tt.utm, got, tt.want, tt.from)
		}
	}
}

func TestIsExternal(t *testing.T) {
	tests := []struct {
		ref, page string
		want      bool
	}{
		{"google.com", "example.com", true},
		{"", "example.com", false},
		{"localhost", "example.com", false},
		{"example.com", "example.com", false},
		{"www.example.com", "example.com", false},
		{"Example.COM", "www.example.com", false},
		{"example.com.", "example.com", false},
		{"blog.example.com", "example.com", true}, // Plausible compares whole hosts
		{"example.org", "example.com", true},
	}
	for _, tt := range tests {
		if got := IsExternal(tt.ref, tt.page); got != tt.want {
			t.Errorf("IsExternal(%q, %q) = %v; want %v", tt.ref, tt.page, got, tt.want)
		}
	}
}
