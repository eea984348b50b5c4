package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/waymark/waymark/store"
)

// sitePatchRequest is the body of PATCH /v1/sites/{id}; nil leaves a
// field alone.
type sitePatchRequest struct {
	timezone *string
	honorDNT *bool
}

var sitePatchFields = []string{"timezone", "honor_dnt"}

func decodeSitePatch(body []byte) (sitePatchRequest, error) {
	o, err := decodeObject(body, sitePatchFields)
	if err != nil {
		if strings.HasPrefix(err.Error(), `unknown field "domain"`) {
			return sitePatchRequest{}, errors.New(`field "domain" cannot be changed; register a new site for another domain`)
		}
		return sitePatchRequest{}, err
	}
	var req sitePatchRequest
	tz, st, err := o.str("timezone")
	switch {
	case err != nil:
		return sitePatchRequest{}, err
	case st == fieldNull:
		return sitePatchRequest{}, errors.New(`field "timezone" cannot be null`)
	case st == fieldSet:
		if err := checkTimezone(tz); err != nil {
			return sitePatchRequest{}, err
		}
		req.timezone = &tz
	}
	honor, st, err := o.boolean("honor_dnt")
	switch {
	case err != nil:
		return sitePatchRequest{}, err
	case st == fieldNull:
		return sitePatchRequest{}, errors.New(`field "honor_dnt" cannot be null; send true or false`)
	case st == fieldSet:
		req.honorDNT = &honor
	}
	return req, nil
}

func (o jsonObject) boolean(name string) (bool, fieldState, error) {
	st := o.state(name)
	if st != fieldSet {
		return false, st, nil
	}
	var v bool
	if err := json.Unmarshal(o[name], &v); err != nil {
		return false, st, fmt.Errorf("field %q must be true or false", name)
	}
	return v, st, nil
}

var goalFields = []string{"event_name", "page_path", "display_name", "goal_type"}

// decodeGoal reads the body of POST /v1/sites/{id}/goals: exactly one of
// "event_name" and "page_path", an optional "display_name", and an
// optional "goal_type" ("event" or "page", as Plausible's Sites API sends)
// that must agree. The goal comes back normalised as Plausible stores it
// (trimmed, a leading "/" on the path, the default display name), without
// an id.
func decodeGoal(body []byte) (store.Goal, error) {
	o, err := decodeObject(body, goalFields)
	if err != nil {
		return store.Goal{}, err
	}
	var g store.Goal
	event, evSt, err := o.str("event_name")
	if err != nil {
		return store.Goal{}, err
	}
	path, pathSt, err := o.str("page_path")
	if err != nil {
		return store.Goal{}, err
	}
	g.EventName, g.PagePath = strings.TrimSpace(event), strings.TrimSpace(path)
	switch {
	case evSt == fieldSet && pathSt == fieldSet:
		return store.Goal{}, errors.New(`send either "event_name" or "page_path", not both`)
	case evSt == fieldSet && g.EventName == "":
		return store.Goal{}, errors.New(`field "event_name" must not be empty`)
	case pathSt == fieldSet && g.PagePath == "":
		return store.Goal{}, errors.New(`field "page_path" must not be empty`)
	case g.EventName == "" && g.PagePath == "":
		return store.Goal{}, errors.New(`field "event_name" (a custom event goal) or "page_path" (a pageview goal such as "/pricing" or "/blog/*") is required`)
	case len(g.EventName) > store.MaxGoalEventNameLen:
		return store.Goal{}, fmt.Errorf(`field "event_name" is %d bytes; the limit is %d`, len(g.EventName), store.MaxGoalEventNameLen)
	case g.EventName == store.ReservedGoalEvent:
		return store.Goal{}, fmt.Errorf(`event name %q is reserved (time on page) and cannot be a goal`, store.ReservedGoalEvent)
	case len(g.PagePath) > store.MaxGoalPagePathLen:
		return store.Goal{}, fmt.Errorf(`field "page_path" is %d bytes; the limit is %d`, len(g.PagePath), store.MaxGoalPagePathLen)
	}
	typ, st, err := o.str("goal_type")
	switch {
	case err != nil:
		return store.Goal{}, err
	case st == fieldSet && typ != "event" && typ != "page":
		return store.Goal{}, fmt.Errorf(`field "goal_type" must be "event" or "page"; got %q`, typ)
	case st == fieldSet && typ == "page" && g.PagePath == "":
		return store.Goal{}, errors.New(`field "goal_type" is "page" but the body sets "event_name"`)
	case st == fieldSet && typ == "event" && g.EventName == "":
		return store.Goal{}, errors.New(`field "goal_type" is "event" but the body sets "page_path"`)
	}
	name, st, err := o.str("display_name")
	switch {
	case err != nil:
		return store.Goal{}, err
	case st == fieldSet && strings.TrimSpace(name) == "":
		return store.Goal{}, errors.New(`field "display_name" must not be empty; omit it for "Visit <path>" or the event name`)
	case len(strings.TrimSpace(name)) > store.MaxGoalDisplayNameLen:
		return store.Goal{}, fmt.Errorf(`field "display_name" is %d bytes; the limit is %d`, len(name), store.MaxGoalDisplayNameLen)
	}
	g.DisplayName = name
	g.ID = "pending" // a valid placeholder for the checks; the caller sets the real one
	if err := store.NormalizeGoal(&g); err != nil {
		return store.Goal{}, err
	}
	g.ID = ""
	return g, nil
}
