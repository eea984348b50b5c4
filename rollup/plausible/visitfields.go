package plausible

import "strings"

// visitField is a visit attribute dimension.
type visitField uint8

const (
	vfSource visitField = iota
	vfChannel
	vfReferrer
	vfUTMMedium
	vfUTMSource
	vfUTMCampaign
	vfUTMContent
	vfUTMTerm
	vfDevice
	vfBrowser
	vfBrowserVersion
	vfOS
	vfOSVersion
	vfCountry
	vfRegion
	vfCity
	vfCountryName
	vfRegionName
	vfCityName
	numVisitFields
)

var visitFieldByName = map[string]visitField{
	"visit:source": vfSource, "visit:channel": vfChannel, "visit:referrer": vfReferrer,
	"visit:utm_medium": vfUTMMedium, "visit:utm_source": vfUTMSource, "visit:utm_campaign": vfUTMCampaign,
	"visit:utm_content": vfUTMContent, "visit:utm_term": vfUTMTerm,
	"visit:device": vfDevice, "visit:screen": vfDevice,
	"visit:browser": vfBrowser, "visit:browser_version": vfBrowserVersion,
	"visit:os": vfOS, "visit:os_version": vfOSVersion,
	"visit:country": vfCountry, "visit:region": vfRegion, "visit:city": vfCity,
	"visit:country_name": vfCountryName, "visit:region_name": vfRegionName, "visit:city_name": vfCityName,
}

const (
	noRef  = "Direct / None"
	notSet = "(not set)"
	noneV  = "(none)"
)

// noRefField: "Direct / None" stands for empty in filters, and a contains
// filter that "Direct / None" contains also matches empty values
// (where_builder.ex no_ref_field?).
func (f visitField) noRefField() bool {
	return f <= vfUTMTerm && f != vfChannel
}

// blankLabel is what an empty value is shown as (expression.ex
// field_or_blank_value); "" when shown raw.
func (f visitField) blankLabel() string {
	switch f {
	case vfSource, vfReferrer:
		return noRef
	case vfChannel:
		return "Direct"
	case vfUTMMedium, vfUTMSource, vfUTMCampaign, vfUTMContent, vfUTMTerm,
		vfDevice, vfBrowser, vfBrowserVersion, vfOS, vfOSVersion:
		return notSet
	case vfCountry:
		return "\x00\x00" // an empty FixedString(2)
	}
	return ""
}

// deviceName is the device class as Plausible stores it.
func deviceName(d string) string {
	switch d {
	case "desktop":
		return "Desktop"
	case "mobile":
		return "Mobile"
	case "tablet":
		return "Tablet"
	}
	return d
}

// visitValues computes the raw stored value of a visit field per attrs
// record, once per query.
func (e *engine) visitValues(f visitField) []string {
	if vals := e.visitRaw[f]; vals != nil {
		return vals
	}
	vals := make([]string, e.d.attrs.len())
	for i := range vals {
		a := e.d.attrs.at(int32(i))
		var v string
		switch f {
		case vfSource:
			v = e.cfg.Source(a.referrerHost, a.utmSource)
		case vfChannel:
			src := e.visitValues(vfSource)[i]
			v = e.cfg.Channel(src, a.referrerHost, a.utmSource, a.utmMedium, a.utmCampaign)
		case vfReferrer:
			v = strings.TrimPrefix(a.referrerHost, "www.")
		case vfUTMMedium:
			v = a.utmMedium
		case vfUTMSource:
			v = a.utmSource
		case vfUTMCampaign:
			v = a.utmCampaign
		case vfUTMContent:
			v = a.utmContent
		case vfUTMTerm:
			v = a.utmTerm
		case vfDevice:
			v = deviceName(a.device)
		case vfBrowser:
			v = a.browser
		case vfBrowserVersion:
			v = a.browserVersion
		case vfOS:
			v = a.os
		case vfOSVersion:
			v = a.osVersion
		case vfCountry:
			v = a.country
		case vfRegion:
			v = a.region
		case vfCity:
			v = a.city
		case vfCountryName, vfRegionName, vfCityName:
			if e.cfg.LocationName != nil {
				kind, code := "country", a.country
				if f == vfRegionName {
					kind, code = "region", a.region
				} else if f == vfCityName {
					kind, code = "city", a.city
				}
				if code != "" {
					v = e.cfg.LocationName(kind, code)
				}
			}
		}
		vals[i] = v
	}
	e.visitRaw[f] = vals
	return vals
}

// visitLabelCodes gives each attrs record the code of its shown value.
func (e *engine) visitLabelCodes(f visitField) []int32 {
	if codes := e.visitCodes[f]; codes != nil {
		return codes
	}
	raw := e.visitValues(f)
	codes := make([]int32, len(raw))
	blank := f.blankLabel()
	for i, v := range raw {
		if v == "" {
			v = blank
		}
		codes[i] = e.labels.id(v)
	}
	e.visitCodes[f] = codes
	return codes
}
