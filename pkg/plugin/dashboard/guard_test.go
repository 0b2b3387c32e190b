package dashboard

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

const testToken = "the-token-of-this-run"

// fixedSource is a Source of fixed values.
type fixedSource struct {
	snapshot *view.Snapshot
	rounds   *view.Rounds
	events   []Event
	err      error
	// asked are the jobs Rounds and Events were asked for.
	asked []string
}

func (s *fixedSource) Snapshot(_ context.Context) (*view.Snapshot, error) { return s.snapshot, s.err }

func (s *fixedSource) Rounds(_ context.Context, kind, namespace, name string) (*view.Rounds, error) {
	s.asked = append(s.asked, "rounds "+kind+"/"+namespace+"/"+name)
	return s.rounds, s.err
}

func (s *fixedSource) Events(_ context.Context, kind, namespace, name string) ([]Event, error) {
	s.asked = append(s.asked, "events "+kind+"/"+namespace+"/"+name)
	return s.events, s.err
}

// serve starts the dashboard of src on a loopback port, as Serve does,
// and returns its base URL (http://127.0.0.1:port).
func serve(t *testing.T, src Source) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.Config.Handler = NewHandler(src, testToken, netip.MustParseAddrPort(ts.Listener.Addr().String()))
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

// do sends a request to the dashboard at base, with edit applied.
func do(t *testing.T, method, url string, edit func(*http.Request)) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(req)
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

func TestGuardRefusesWhatIsNotTheUsersOwnGET(t *testing.T) {
	src := &fixedSource{snapshot: &view.Snapshot{}}
	base := serve(t, src)
	port := base[strings.LastIndex(base, ":")+1:]
	cases := map[string]struct {
		method, path string
		edit         func(*http.Request)
		want         int
	}{
		"no token":                   {method: "GET", path: "/api/snapshot", want: http.StatusUnauthorized},
		"no token, an unknown path":  {method: "GET", path: "/api/secrets", want: http.StatusUnauthorized},
		"another bearer token":       {method: "GET", path: "/api/snapshot", edit: bearer("not-" + testToken), want: http.StatusForbidden},
		"the token in the URL":       {method: "GET", path: "/api/snapshot?token=" + testToken, want: http.StatusUnauthorized},
		"the token as a cookie":      {method: "GET", path: "/api/snapshot", edit: cookie("nereid-dashboard-"+port, testToken), want: http.StatusUnauthorized},
		"a rebinding name":           {method: "GET", path: "/api/snapshot", edit: host("evil.example:" + port), want: http.StatusMisdirectedRequest},
		"a rebinding name, the page": {method: "GET", path: "/?token=" + testToken, edit: host("evil.example:" + port), want: http.StatusMisdirectedRequest},
		"a POST to the page":         {method: "POST", path: "/", want: http.StatusMethodNotAllowed},
		"another port":               {method: "GET", path: "/api/snapshot", edit: host("127.0.0.1:1"), want: http.StatusMisdirectedRequest},
		"no port":                    {method: "GET", path: "/api/snapshot", edit: host("127.0.0.1"), want: http.StatusMisdirectedRequest},
		"a POST with the token":      {method: "POST", path: "/api/snapshot", edit: bearer(testToken), want: http.StatusMethodNotAllowed},
		"a DELETE with the token":    {method: "DELETE", path: "/", edit: bearer(testToken), want: http.StatusMethodNotAllowed},
		"a GET with a body":          {method: "GET", path: "/api/snapshot", edit: withBody(bearer(testToken)), want: http.StatusRequestEntityTooLarge},
		"an unknown path":            {method: "GET", path: "/api/secrets", edit: bearer(testToken), want: http.StatusNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := do(t, tc.method, base+tc.path, tc.edit)
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
			checkSecurityHeaders(t, resp)
		})
	}
	if len(src.asked) > 0 {
		t.Errorf("the source was asked %v by refused requests", src.asked)
	}
}

// A browser sends 127.0.0.1's cookies to every port of 127.0.0.1, even
// when a web page of any other site merely sends it there: a server of
// another local user on another port would get a token kept in a cookie.
// So the printed URL's token is never made a cookie, and no cookie opens
// the dashboard.
func TestTheTokenIsNeverACookie(t *testing.T) {
	src := &fixedSource{snapshot: &view.Snapshot{}}
	base := serve(t, src)
	port := base[strings.LastIndex(base, ":")+1:]
	resp := do(t, "GET", base+"/?token="+testToken+"#/fleet", nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the printed URL: status %d, want 200 (the page, which takes the token)", resp.StatusCode)
	}
	if c := resp.Header.Values("Set-Cookie"); len(c) > 0 {
		t.Errorf("the printed URL sets cookies %q, want none", c)
	}
	for _, name := range []string{"nereid-dashboard-" + port, tokenParam} {
		resp := do(t, "GET", base+"/api/snapshot", cookie(name, testToken))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the token as cookie %s: status %d, want 401", name, resp.StatusCode)
		}
	}
	if len(src.asked) > 0 {
		t.Errorf("the source was asked %v without a bearer token", src.asked)
	}
}

func checkSecurityHeaders(t *testing.T, resp *http.Response) {
	t.Helper()
	for k, want := range securityHeaders {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	for k := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("a CORS header %s: other origins must not read the dashboard", k)
		}
	}
}

func cookie(name, value string) func(*http.Request) {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: name, Value: value}) }
}

func host(h string) func(*http.Request) { return func(r *http.Request) { r.Host = h } }

func withBody(edit func(*http.Request)) func(*http.Request) {
	return func(r *http.Request) {
		edit(r)
		r.Body = io.NopCloser(strings.NewReader("{}"))
		r.ContentLength = 2
	}
}

func TestListenAddressIsLoopbackOnly(t *testing.T) {
	cases := map[string]struct {
		o    options
		want string // "" refused
	}{
		"the default":       {o: options{address: "127.0.0.1"}, want: "127.0.0.1:0"},
		"another loopback":  {o: options{address: "127.0.0.2", port: 8080}, want: "127.0.0.2:8080"},
		"IPv6 loopback":     {o: options{address: "::1", port: 1}, want: "[::1]:1"},
		"every address":     {o: options{address: "0.0.0.0"}},
		"every v6 address":  {o: options{address: "::"}},
		"a LAN address":     {o: options{address: "192.168.1.10"}},
		"a name":            {o: options{address: "localhost"}},
		"a zoned address":   {o: options{address: "::1%lo"}},
		"a port over range": {o: options{address: "127.0.0.1", port: 65536}},
		"a negative port":   {o: options{address: "127.0.0.1", port: -1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := listenAddress(tc.o)
			switch {
			case tc.want == "" && err == nil:
				t.Errorf("listenAddress(%+v) = %s, want refused", tc.o, got)
			case tc.want != "" && err != nil:
				t.Errorf("listenAddress(%+v): %v, want %s", tc.o, err, tc.want)
			case tc.want != "" && got.String() != tc.want:
				t.Errorf("listenAddress(%+v) = %s, want %s", tc.o, got, tc.want)
			}
		})
	}
}
