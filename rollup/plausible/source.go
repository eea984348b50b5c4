package plausible

import (
	"regexp"
	"strings"
)

// DefaultSource is a stand-in for the referrer database: the utm_source
// tag when there is one (a tag beats the referrer, ingestion/source.ex),
// else the referrer host without "www.".
func DefaultSource(referrerHost, utmSource string) string {
	if utmSource != "" {
		return utmSource
	}
	return strings.TrimPrefix(referrerHost, "www.")
}

var (
	paidMedium  = regexp.MustCompile(`^(.*cp.*|ppc|retargeting|paid.*)$`)
	emailRegexp = regexp.MustCompile(`e[-_ ]?mail|newsletter`)
)

// DefaultChannel applies the rules of Plausible's acquisition_channel SQL
// function that need no source-category table (no search, social, video,
// shopping or email categories): enough for tests, replaced in production
// by the referrer-database implementation.
func DefaultChannel(source, referrerHost, utmSource, utmMedium, utmCampaign string) string {
	src := strings.ToLower(source)
	medium := strings.ToLower(utmMedium)
	campaign := strings.ToLower(utmCampaign)
	tag := strings.ToLower(utmSource)
	switch {
	case strings.Contains(campaign, "cross-network"):
		return "Cross-network"
	case oneOf(medium, "display", "banner", "expandable", "interstitial", "cpm"):
		return "Display"
	case paidMedium.MatchString(medium):
		return "Paid Other"
	case oneOf(medium, "social", "social-network", "social-media", "sm", "social network", "social media"):
		return "Organic Social"
	case strings.Contains(medium, "video"):
		return "Organic Video"
	case emailRegexp.MatchString(tag) || emailRegexp.MatchString(medium):
		return "Email"
	case medium == "affiliate":
		return "Affiliates"
	case medium == "audio":
		return "Audio"
	case tag == "sms" || medium == "sms":
		return "SMS"
	case strings.HasSuffix(medium, "push") || strings.Contains(medium, "mobile") ||
		strings.Contains(medium, "notification") || src == "firebase":
		return "Mobile Push Notifications"
	case oneOf(medium, "referral", "app", "link") || src != "":
		return "Referral"
	}
	return "Direct"
}

func oneOf(s string, set ...string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}
