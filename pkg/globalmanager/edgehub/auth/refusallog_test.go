package auth

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/textlogger"
	testingclock "k8s.io/utils/clock/testing"
)

// Refusals are logged once at once, then as one line per reason and period
// that counts them.
func TestRefusalsAreLoggedAtABoundedRate(t *testing.T) {
	var out bytes.Buffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&out)))
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	l := NewRefusalLog(clk)
	junk := RefusedConn{Remote: "10.0.0.1:1", Status: http.StatusUnauthorized, Reason: "the token is not valid: its signature does not verify"}
	for i := range 1000 {
		junk.Remote = fmt.Sprintf("10.0.0.1:%d", i)
		l.Refused(logger, RefusedInvalidToken, junk)
	}
	l.Refused(logger, RefusedNotEdgeNode, RefusedConn{Remote: "10.0.0.2:1", Status: http.StatusForbidden, Reason: "node cloud-0 is not an edge node"})
	l.flush(logger, false) // within the period: nothing more
	clk.Step(refusalLogPeriod)
	l.flush(logger, false)
	l.flush(logger, false) // nothing new
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		_, msg, _ := strings.Cut(line, "] ") // after the header of time and file
		got = append(got, msg)
	}
	want := []string{
		`"Refused an edge connection" refusal="invalid_token" remote="10.0.0.1:0" status=401 reason="the token is not valid: its signature does not verify" err=null`,
		`"Refused an edge connection" refusal="not_edge_node" remote="10.0.0.2:1" status=403 reason="node cloud-0 is not an edge node" err=null`,
		`"Refused edge connections" refusal="invalid_token" count=999 in="10s" lastRemote="10.0.0.1:999" lastStatus=401 lastReason="the token is not valid: its signature does not verify" lastErr=null`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want,+got):\n%s", diff)
	}
}
