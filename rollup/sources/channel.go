package sources

import "strings"

// The acquisition channels, in the order Channel tries them (Plausible's
// Plausible.Ingestion.Acquisition.get_channel). Channel returns one of
// these, never "".
const (
	CrossNetwork            = "Cross-network"
	PaidShopping            = "Paid Shopping"
	PaidSearch              = "Paid Search"
	PaidSocial              = "Paid Social"
	PaidVideo               = "Paid Video"
	Display                 = "Display"
	PaidOther               = "Paid Other"
	OrganicShopping         = "Organic Shopping"
	OrganicSocial           = "Organic Social"
	OrganicVideo            = "Organic Video"
	AIAssistants            = "AI Assistants"
	OrganicSearch           = "Organic Search"
	Email                   = "Email"
	Affiliates              = "Affiliates"
	Audio                   = "Audio"
	SMS                     = "SMS"
	MobilePushNotifications = "Mobile Push Notifications"
	Referral                = "Referral"
	Direct                  = "Direct"
)

// Channels lists every channel in decision order (for validating a
// visit:channel filter value, or listing them on a dashboard).
var Channels = [...]string{
	CrossNetwork, PaidShopping, PaidSearch, PaidSocial, PaidVideo, Display,
	PaidOther, OrganicShopping, OrganicSocial, OrganicVideo, AIAssistants,
	OrganicSearch, Email, Affiliates, Audio, SMS, MobilePushNotifications,
	Referral, Direct,
}

// UTM holds the campaign tags a visit arrived with.
type UTM struct {
	Source   string // utm_source as sent (or "source" / "ref", as for Source)
	Medium   string // utm_medium
	Campaign string // utm_campaign
}

// Click-id parameter names that make Google and Bing traffic paid search.
const (
	ClickIDGoogle = "gclid"
	ClickIDBing   = "msclkid"
)

// Channel returns the acquisition channel of a visit, following the
// rules and order of Plausible's get_channel (which follows Google's GA4
// default channel group). source is the visit's Source; utm its tags;
// clickID names the ad click-id parameter the landing URL carried
// (ClickIDGoogle, ClickIDBing) or is "" (its value is never needed).
// Comparisons ignore case, as Plausible lower-cases every input.
//
// Source categories (search, social, email, video, shopping, AI) come from
// the referrer database's media plus data/overrides.txt; README.md says
// which is which.
func Channel(source string, utm UTM, clickID string) string {
	t := load()
	cat := t.category(source)
	medium, campaign := utm.Medium, utm.Campaign
	paidMedium := medium != "" && isPaidMedium(medium)
	// A paid utm_source only matters for a search, social or video source.
	paidSource := (cat == catSearch || cat == catSocial || cat == catVideo) && t.paidSource(utm.Source)
	shopCampaign := campaign != "" && isShoppingCampaign(campaign)

	if medium == "" && campaign == "" && utm.Source == "" && clickID == "" {
		return untagged(cat, source) // the common case: referrer only
	}
	switch {
	case containsFold(campaign, "cross-network"):
		return CrossNetwork
	case (cat == catShopping || shopCampaign) && paidMedium:
		return PaidShopping
	case cat == catSearch && (paidMedium || paidSource),
		clickID == ClickIDGoogle && equalFold(source, "google"),
		clickID == ClickIDBing && equalFold(source, "bing"):
		return PaidSearch
	case cat == catSocial && (paidMedium || paidSource):
		return PaidSocial
	case cat == catVideo && (paidMedium || paidSource):
		return PaidVideo
	case inFold(medium, displayMedia):
		return Display
	case paidMedium:
		return PaidOther
	case cat == catShopping || shopCampaign:
		return OrganicShopping
	case cat == catSocial || inFold(medium, socialMedia):
		return OrganicSocial
	case cat == catVideo || containsFold(medium, "video"):
		return OrganicVideo
	case cat == catAI:
		return AIAssistants
	case cat == catSearch:
		return OrganicSearch
	case cat == catEmail || containsAnyFold(utm.Source, emailTags) || containsAnyFold(medium, emailTags):
		return Email
	case equalFold(medium, "affiliate"):
		return Affiliates
	case equalFold(medium, "audio"):
		return Audio
	case equalFold(utm.Source, "sms") || equalFold(medium, "sms"):
		return SMS
	case hasSuffixFold(medium, "push") || containsFold(medium, "mobile") ||
		containsFold(medium, "notification") || equalFold(source, "firebase"):
		return MobilePushNotifications
	case inFold(medium, referralMedia) || source != "":
		return Referral
	}
	return Direct
}

// untagged is Channel for a visit without tags or click id: every rule
// on a tag is false, so only the source's category (and firebase) decides.
func untagged(cat category, source string) string {
	switch cat {
	case catShopping:
		return OrganicShopping
	case catSocial:
		return OrganicSocial
	case catVideo:
		return OrganicVideo
	case catAI:
		return AIAssistants
	case catSearch:
		return OrganicSearch
	case catEmail:
		return Email
	}
	switch {
	case equalFold(source, "firebase"):
		return MobilePushNotifications
	case source != "":
		return Referral
	}
	return Direct
}

var (
	displayMedia  = []string{"display", "banner", "expandable", "interstitial", "cpm"}
	socialMedia   = []string{"social", "social-network", "social-media", "sm", "social network", "social media"}
	emailTags     = []string{"email", "e-mail", "e_mail", "e mail", "newsletter"}
	referralMedia = []string{"referral", "app", "link"}
)

// isPaidMedium is Plausible's ^(.*cp.*|ppc|retargeting|paid.*)$ on the
// lower-cased medium: it contains "cp", is "ppc" or "retargeting", or
// starts with "paid".
func isPaidMedium(medium string) bool {
	m, ok := regexLine(medium)
	if !ok {
		return false
	}
	return containsFold(m, "cp") || equalFold(m, "ppc") || equalFold(m, "retargeting") || hasPrefixFold(m, "paid")
}

// isShoppingCampaign is Plausible's ^(.*(([^a-df-z]|^)shop|shopping).*)$
// on the lower-cased campaign: it contains "shopping", or "shop" at the
// start or after a character other than a-d and f-z ("eshop" and
// "summer-shop" match, "workshop" does not).
func isShoppingCampaign(campaign string) bool {
	c, ok := regexLine(campaign)
	if !ok {
		return false
	}
	if containsFold(c, "shopping") {
		return true
	}
	for i := 0; ; {
		j := indexFold(c[i:], "shop")
		if j < 0 {
			return false
		}
		at := i + j
		if at == 0 {
			return true
		}
		if p := lowerByte(c[at-1]); p < 'a' || p > 'z' || p == 'e' {
			return true
		}
		i = at + 1
	}
}

// regexLine gives the text an anchored PCRE pattern built of ".*" can
// match: "." does not match a newline and "$" also matches before a final
// one. ok is false when s has a newline before its end.
func regexLine(s string) (string, bool) {
	s = strings.TrimSuffix(s, "\n")
	return s, strings.IndexByte(s, '\n') < 0
}
