package plausible

import (
	"errors"
	"fmt"
)

// QueryError is a query Plausible would refuse. Message is Plausible's exact
// text; the HTTP layer answers 400 {"error": Message}.
type QueryError struct {
	Message string
}

func (e *QueryError) Error() string { return e.Message }

func queryErr(format string, args ...any) *QueryError {
	return &QueryError{Message: fmt.Sprintf(format, args...)}
}

// ErrTooManyEvents is wrapped by the ScanLimitError Evaluate returns when a
// query would read more raw events than Config.MaxEvents.
var ErrTooManyEvents = errors.New("too many raw events for one query")

// ScanLimitError says a query was refused because it would scan more raw
// events than allowed. The HTTP layer maps it to 400 {"error": Error()}.
type ScanLimitError struct {
	Limit int
}

func (e *ScanLimitError) Error() string {
	return fmt.Sprintf("The query reads more than %d raw events. Please narrow the date range or the filters.", e.Limit)
}

func (e *ScanLimitError) Unwrap() error { return ErrTooManyEvents }
