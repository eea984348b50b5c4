package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/waymark/waymark/store"
)

// The API fields of issue 13: "rules" (13.1, rules.go), "password" (write
// only) and "preview" on POST /v1/links and PATCH /v1/links/{code}
// (patchFields holds "rules"). Bulk creates take none of them (their
// items keep createFields).

var (
	createBodyFields = append(append([]string(nil), createFields...), "rules", "password", "preview")
	patchBodyFields  = append(append([]string(nil), patchFields...), "password", "preview")
	previewFields    = []string{"title", "description", "image"}
)

// gateFields are the password and preview of a request as sent: the
// password in clear (hashed by the handler), the image URL not yet
// validated.
type gateFields struct {
	setPassword bool
	password    string // "" removes (PATCH)
	setPreview  bool
	preview     store.Preview // zero removes (PATCH)
}

// decodeGates reads "password" and "preview" from o. On a create, null
// and absent are the same (none).
func decodeGates(o jsonObject) (gateFields, error) {
	var g gateFields
	pw, st, err := o.str("password")
	if err != nil {
		return g, err
	}
	if st != fieldAbsent {
		g.setPassword, g.password = true, pw
		if pw != "" {
			if err := checkPassword(pw); err != nil {
				return g, err
			}
		}
	}
	switch o.state("preview") {
	case fieldNull:
		g.setPreview = true
	case fieldSet:
		p, err := decodePreview(o["preview"])
		if err != nil {
			return g, err
		}
		g.setPreview, g.preview = true, p
	}
	return g, nil
}

// decodePreview type-checks a preview object; the image URL is validated
// by the handler, like a destination.
func decodePreview(raw json.RawMessage) (store.Preview, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return store.Preview{}, errors.New(`field "preview" must be an object with "title", "description" and "image", or null`)
	}
	o, err := decodeObject(raw, previewFields)
	if err != nil {
		return store.Preview{}, fmt.Errorf(`field "preview": %w`, err)
	}
	var p store.Preview
	for _, f := range []struct {
		name string
		v    *string
	}{{"title", &p.Title}, {"description", &p.Description}, {"image", &p.Image}} {
		if *f.v, _, err = o.str(f.name); err != nil {
			return store.Preview{}, fmt.Errorf(`field "preview": %w`, err)
		}
	}
	if p.IsZero() {
		return store.Preview{}, errors.New(`field "preview" needs a "title", a "description" or an "image"; send null to remove it`)
	}
	if why := p.Problem(); why != "" {
		return store.Preview{}, fmt.Errorf(`field "preview": %s (title up to %d bytes, description %d, image %d)`,
			why, store.MaxPreviewTitle, store.MaxPreviewDescription, store.MaxPreviewImage)
	}
	return p, nil
}
