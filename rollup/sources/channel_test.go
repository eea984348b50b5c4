package sources

import "testing"

// channelCase is one hand-checked input. Unless from says otherwise, the
// case is from the static table of Plausible's
// test/plausible/ingestion/acquisition_test.exs, whose inputs are the
// visit's referrer_source (our Source), utm_* tags and click-id parameter
// and whose expectation is the channel get_channel returns.
type channelCase struct {
	source, utmSource, medium, campaign, clickID string
	want, from                                   string
}

func TestChannelPlausibleCases(t *testing.T) {
	tests := []channelCase{
		{want: Direct},
		{campaign: "cross-network", want: CrossNetwork},
		{campaign: "shopping", medium: "paid", want: PaidShopping},
		{source: "shopify.com", medium: "paid", want: PaidShopping},
		{source: "shopify", utmSource: "shopify", medium: "paid", want: PaidShopping},
		{source: "DuckDuckGo", medium: "paid", want: PaidSearch},
		{source: "Google", clickID: "gclid", want: PaidSearch},
		{source: "DuckDuckGo", clickID: "gclid", want: OrganicSearch},
		{source: "Bing", clickID: "msclkid", want: PaidSearch},
		{source: "DuckDuckGo", clickID: "msclkid", want: OrganicSearch},
		{source: "google", utmSource: "google", medium: "paid", want: PaidSearch},
		{source: "TikTok", medium: "paid", want: PaidSocial},
		{source: "tiktok", utmSource: "tiktok", medium: "paid", want: PaidSocial},
		{source: "Youtube", medium: "paid", want: PaidVideo},
		{source: "youtube", utmSource: "youtube", medium: "paid", want: PaidVideo},
		{medium: "banner", want: Display},
		{medium: "cpc", want: PaidOther},
		{source: "walmart.com", want: OrganicShopping},
		{source: "walmart", utmSource: "walmart", want: OrganicShopping},
		{campaign: "shop", want: OrganicShopping},
		{source: "Facebook", want: OrganicSocial},
		{source: "X (Twitter)", utmSource: "twitter", want: OrganicSocial},
		{medium: "social", want: OrganicSocial},
		{source: "Vimeo", want: OrganicVideo},
		{source: "vimeo", utmSource: "vimeo", want: OrganicVideo},
		{medium: "video", want: OrganicVideo},
		{source: "DuckDuckGo", want: OrganicSearch},
		{source: "duckduckgo", utmSource: "duckduckgo", want: OrganicSearch},
		{medium: "referral", want: Referral},
		{source: "email", utmSource: "email", want: Email},
		{medium: "email", want: Email},
		{medium: "affiliate", want: Affiliates},
		{medium: "audio", want: Audio},
		{source: "sms", utmSource: "sms", want: SMS},
		{medium: "sms", want: SMS},
		{medium: "app-push", want: MobilePushNotifications},
		{medium: "example-mobile", want: MobilePushNotifications},
		{source: "othersite.com", want: Referral},
		{source: "Threads", utmSource: "threads", want: OrganicSocial},
		{source: "Instagram", utmSource: "ig", want: OrganicSocial},
		{source: "Youtube", utmSource: "yt", want: OrganicVideo},
		{source: "Youtube", utmSource: "yt-ads", want: PaidVideo},
		{source: "Facebook", utmSource: "fb", want: OrganicSocial},
		{source: "Facebook", utmSource: "fb-ads", want: PaidSocial},
		{source: "Facebook", utmSource: "fbad", want: PaidSocial},
		{source: "Facebook", utmSource: "facebook-ads", want: PaidSocial},
		{source: "Reddit", utmSource: "Reddit-ads", want: PaidSocial},
		{source: "Google", utmSource: "google_ads", want: PaidSearch},
		{source: "Google", utmSource: "Google-ads", want: PaidSearch},
		{source: "Google", utmSource: "Adwords", want: PaidSearch},
		{source: "X (Twitter)", utmSource: "twitter-ads", want: PaidSocial},
		{source: "Reddit", want: OrganicSocial},
		{source: "Perplexity", want: AIAssistants},
		{source: "Microsoft Teams", want: OrganicSocial},
		{source: "Wikipedia", want: Referral},
		{source: "Bing", want: OrganicSearch},
		{source: "Brave", want: OrganicSearch},
		{source: "Yandex", want: OrganicSearch},
		{source: "Discord", want: OrganicSocial},
		{source: "Baidu", want: OrganicSearch},
		{source: "Telegram", want: OrganicSocial},
		{source: "Sogou", want: OrganicSearch},
		{source: "Linktree", want: Referral},
		{source: "Linktree", utmSource: "linktree", want: Referral},
		{source: "Hacker News", want: OrganicSocial},
		{source: "Yahoo!", want: OrganicSearch},
		{source: "Gmail", want: Email},
		{source: "Newsletter-UK", utmSource: "Newsletter-UK", want: Email},
		{source: "temu.com", want: OrganicShopping},
		{source: "Telegram", utmSource: "Telegram", want: OrganicSocial},
		{source: "Bluesky", want: OrganicSocial},
		{source: "Mastodon", want: OrganicSocial},
		{source: "Google Gemini", want: AIAssistants},
		{source: "ChatGPT", want: AIAssistants},
		{source: "Claude", want: AIAssistants},
		{source: "Phind", want: AIAssistants},
		{source: "DeepSeek", want: AIAssistants},
		{source: "Microsoft Copilot", want: AIAssistants},
		{source: "Grok", want: AIAssistants},
		{source: "Slack", want: OrganicSocial},
		{source: "producthunt", want: OrganicSocial},
		{source: "GitHub", want: OrganicSocial},
		{source: "steamcommunity.com", want: OrganicSocial},
		{source: "Vkontakte", want: OrganicSocial},
		{source: "Threads", want: OrganicSocial},
		{source: "Ecosia", want: OrganicSearch},
		{source: "Kagi", want: OrganicSearch},
		{source: "Microsoft 365", want: Referral},
		{source: "Google", medium: "display", clickID: "123identifier", want: Display},
	}
	checkChannels(t, tests)
}

// TestChannelRules adds cases worked out by hand from the rules in
// Plausible's lib/plausible/ingestion/acquisition.ex (get_channel and its
// predicates), where its own test table has none.
func TestChannelRules(t *testing.T) {
	tests := []channelCase{
		{source: "Google", medium: "cpc", want: PaidSearch, from: "search source + medium matching .*cp.*"},
		{source: "Google", want: OrganicSearch, from: "search source, no tags"},
		{source: "Bing", medium: "ppc", want: PaidSearch, from: "ppc is a paid medium"},
		{source: "Google", medium: "retargeting", want: PaidSearch, from: "retargeting is a paid medium"},
		{source: "Google", medium: "PAID-search", want: PaidSearch, from: "paid.* after lower-casing"},
		{source: "Google", medium: "unpaid", want: OrganicSearch, from: "paid must start the medium"},
		{source: "Google", clickID: "gclid", medium: "email", want: PaidSearch, from: "gclid beats email"},
		{source: "Bing", clickID: "gclid", want: OrganicSearch, from: "gclid counts for Google only"},
		{source: "Facebook", medium: "cpc", want: PaidSocial, from: "social source + paid medium"},
		{source: "Facebook", medium: "banner", want: Display, from: "Display is tried before Organic Social"},
		{source: "newsletter", utmSource: "newsletter", medium: "email", want: Email, from: "unknown source, email medium"},
		{source: "Mailchimp", utmSource: "Mailchimp", medium: "E-Mail", want: Email, from: "e-mail tag, any case"},
		{source: "example.com", medium: "cpm", want: Display, from: "cpm is a display medium"},
		{source: "example.com", medium: "cpm-x", want: PaidOther, from: "contains cp, not a display medium"},
		{source: "partner.example", medium: "affiliate", want: Affiliates, from: "Affiliates before Referral"},
		{source: "podcast", utmSource: "podcast", medium: "audio", want: Audio, from: "audio medium"},
		{source: "SMS", utmSource: "SMS", want: SMS, from: "utm_source sms, any case"},
		{medium: "web-push", want: MobilePushNotifications, from: "medium ends with push"},
		{medium: "notification", want: MobilePushNotifications, from: "medium contains notification"},
		{source: "firebase", utmSource: "firebase", want: MobilePushNotifications, from: "source firebase"},
		{medium: "app", want: Referral, from: "medium app with no source is Referral"},
		{medium: "link", want: Referral, from: "medium link"},
		{medium: "print", want: Direct, from: "an unknown medium and no source"},
		{source: "example.com", want: Referral, from: "any other source is Referral"},
		{campaign: "Summer-Cross-Network-2026", source: "Google", want: CrossNetwork, from: "cross-network anywhere in the campaign"},
		{campaign: "eshop", want: OrganicShopping, from: "shop after e"},
		{campaign: "summer_shop", want: OrganicShopping, from: "shop after a non-letter"},
		{campaign: "workshop", want: Direct, from: "shop after k is no shopping campaign"},
		{campaign: "Workshopping", want: OrganicShopping, from: "shopping anywhere"},
		{campaign: "eshop", medium: "cpc", want: PaidShopping, from: "shopping campaign + paid medium"},
		{campaign: "black-friday\nshop", medium: "x", want: Direct, from: "the regex does not cross a newline"},
		{medium: "cpc\n", want: PaidOther, from: "$ matches before a final newline"},
		{source: "Youtube", medium: "video", want: OrganicVideo, from: "video source"},
		{source: "Amazon", want: OrganicShopping, from: "overrides: amazon is a shopping source"},
		{source: "Youtube", utmSource: "yt", medium: "cpc", want: PaidVideo, from: "video + paid medium"},
		{source: "ChatGPT", medium: "cpc", want: PaidOther, from: "no paid channel for AI sources"},
	}
	checkChannels(t, tests)
}

// TestChannelOfSource runs visits from referrer and tags to channel, as
// the aggregator will: Source first, then Channel.
func TestChannelOfSource(t *testing.T) {
	tests := []struct {
		host  string
		utm   UTM
		click string
		want  string
	}{
		{"www.google.com", UTM{}, "", OrganicSearch},
		{"www.google.com", UTM{}, "gclid", PaidSearch},
		{"www.google.com", UTM{Source: "google", Medium: "cpc"}, "", PaidSearch},
		{"m.facebook.com", UTM{}, "", OrganicSocial},
		{"l.facebook.com", UTM{Source: "fb", Medium: "paid_social"}, "", PaidSocial},
		{"t.co", UTM{}, "", OrganicSocial},
		{"duckduckgo.com", UTM{}, "", OrganicSearch},
		{"youtube.com", UTM{}, "", OrganicVideo},
		{"chatgpt.com", UTM{}, "", AIAssistants},
		{"mail.google.com", UTM{}, "", Email},
		{"en.wikipedia.org", UTM{}, "", Referral},
		{"www.markosaric.com", UTM{}, "", Referral},
		{"", UTM{Medium: "email"}, "", Email},
		{"", UTM{Source: "newsletter"}, "", Email},
		{"", UTM{}, "", Direct},
	}
	for _, tt := range tests {
		src := Source(tt.host, tt.utm.Source)
		if got := Channel(src, tt.utm, tt.click); got != tt.want {
			t.Errorf("Channel(Source(%q, %q)=%q, %+v, %q) = %q; want %q", tt.host, tt.utm.Source, src, tt.utm, tt.click, got, tt.want)
		}
	}
}

func checkChannels(t *testing.T, tests []channelCase) {
	t.Helper()
	for _, tt := range tests {
		utm := UTM{Source: tt.utmSource, Medium: tt.medium, Campaign: tt.campaign}
		if got := Channel(tt.source, utm, tt.clickID); got != tt.want {
			t.Errorf("Channel(%q, %+v, %q) = %q; want %q %s", tt.source, utm, tt.clickID, got, tt.want, tt.from)
		}
	}
}

func TestChannelsListed(t *testing.T) {
	// Plausible's get_channel, top to bottom.
	want := []string{
		"Cross-network", "Paid Shopping", "Paid Search", "Paid Social", "Paid Video",
		"Display", "Paid Other", "Organic Shopping", "Organic Social", "Organic Video",
		"AI Assistants", "Organic Search", "Email", "Affiliates", "Audio", "SMS",
		"Mobile Push Notifications", "Referral", "Direct",
	}
	if len(Channels) != len(want) {
		t.Fatalf("len(Channels) = %d; want %d", len(Channels), len(want))
	}
	for i := range want {
		if Channels[i] != want[i] {
			t.Errorf("Channels[%d] = %q; want %q", i, Channels[i], want[i])
		}
	}
}
