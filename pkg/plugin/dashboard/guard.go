package dashboard

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// The guard's bounds and names.
const (
	// maxHeaderBytes bounds a request's line and headers; a GET has no body.
	maxHeaderBytes = 16 << 10
	// tokenParam is the printed URL's query parameter that carries the
	// token to the page (app.js takes it from there); the server never
	// reads it.
	tokenParam = "token"
)

// securityHeaders are on every answer, refusals included. The page loads
// its script and style from files ('self'), never inline, and fetches only
// its own origin.
var securityHeaders = map[string]string{
	"Content-Security-Policy":      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options":       "nosniff",
	"X-Frame-Options":              "DENY",
	"Referrer-Policy":              "no-referrer",
	"Cross-Origin-Opener-Policy":   "same-origin",
	"Cross-Origin-Resource-Policy": "same-origin",
	"Cache-Control":                "no-store",
}

// guard is what every request passes before it reaches the dashboard: the
// Host check, GET only, no body, and the token for all but the page's own
// files.
//
// The token travels only as `Authorization: Bearer`, never in a cookie: a
// browser sends 127.0.0.1's cookies to every port of 127.0.0.1 (even when
// a web page of any site merely sends it there), so a server of another
// local user would get it. The page keeps the token in its origin's
// storage, which no other port's page may read.
type guard struct {
	token string
	// host and localhost are the Host headers the dashboard answers to:
	// its address and localhost, with its port.
	host, localhost string
	next            http.Handler
}

// newGuard guards next with token, for a dashboard listening on addr.
func newGuard(next http.Handler, token string, addr netip.AddrPort) *guard {
	localhost := net.JoinHostPort("localhost", strconv.Itoa(int(addr.Port())))
	return &guard{token: token, host: addr.String(), localhost: localhost, next: next}
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	if host := strings.ToLower(r.Host); host != g.host && host != g.localhost {
		// A name that resolves to 127.0.0.1 (DNS rebinding) is another
		// origin: answer nothing to it.
		http.Error(w, "this dashboard answers only to its own address (Host "+g.host+")", http.StatusMisdirectedRequest)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "read-only: GET only", http.StatusMethodNotAllowed)
		return
	}
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		http.Error(w, "a GET has no body", http.StatusRequestEntityTooLarge)
		return
	}
	if _, public := assets[r.URL.Path]; public {
		// The page's files hold no cluster data; the page sends the token.
		g.next.ServeHTTP(w, r)
		return
	}
	switch got := bearerToken(r); {
	case got == "":
		http.Error(w, "no token: open the URL kubectl nereid dashboard printed", http.StatusUnauthorized)
	case subtle.ConstantTimeCompare([]byte(got), []byte(g.token)) != 1:
		http.Error(w, "wrong token: open the URL this run of kubectl nereid dashboard printed", http.StatusForbidden)
	default:
		g.next.ServeHTTP(w, r)
	}
}

// bearerToken is the bearer token a request carries, "" when none.
func bearerToken(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return v
	}
	return ""
}
