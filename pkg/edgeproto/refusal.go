package edgeproto

import (
	"errors"
	"fmt"
)

// RefusedError says a report can never be applied (its object is gone, the
// node has no worker in it, its body makes no sense for its kind). The GM
// acknowledges such a report with the reason, in ReportAck.Refused, so it
// leaves the LC's outbox instead of being resent forever; any other error
// means "try again later" and the report is not acknowledged.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "report refused: " + e.Reason }

// Refuse returns a RefusedError with a formatted reason.
func Refuse(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// IsRefused reports whether err refuses a report, and why.
func IsRefused(err error) (reason string, ok bool) {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}
