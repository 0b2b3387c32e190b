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
		"no token, the page":         {method: "GET", path: "/", want: http.StatusUnauthorized},
		"no token, an asset":         {method: "GET", path: "/app.js", want: http.StatusUnauthorized},
		"another bearer token":       {method: "GET", path: "/api/snapshot", edit: bearer("not-" + testToken), want: http.StatusForbidden},
		"another token in the URL":   {method: "GET", path: "/?token=not-" + testToken, want: http.StatusForbidden},
		"another cookie":             {method: "GET", path: "/api/snapshot", edit: cookie("not-"+testToken, port), want: http.StatusForbidden},
		"another dashboard's cookie": {method: "GET", path: "/api/snapshot", edit: cookie(testToken, "1"), want: http.StatusUnauthorized},
		"a rebinding name":           {method: "GET", path: "/api/snapshot", edit: host("evil.example:" + port), want: http.StatusMisdirectedRequest},
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

func TestTheURLsTokenIsExchangedForACookie(t *testing.T) {
	base := serve(t, &fixedSource{snapshot: &view.Snapshot{}})
	port := base[strings.LastIndex(base, ":")+1:]
	for _, h := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		t.Run(h, func(t *testing.T) {
			resp := do(t, "GET", base+"/?token="+testToken+"&x=1", host(h))
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?x=1" {
				t.Fatalf("status %d Location %q, want 303 to /?x=1 (the URL without its token)", resp.StatusCode, resp.Header.Get("Location"))
			}
			cookies := resp.Cookies()
			if len(cookies) != 1 {
				t.Fatalf("cookies %v, want one", cookies)
			}
			c := cookies[0]
			if c.Name != cookiePrefix+port || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
				t.Errorf("cookie %v: want %s, HttpOnly, SameSite=Strict, Path=/", c, cookiePrefix+port)
			}
			resp = do(t, "GET", base+"/", func(r *http.Request) { r.Host = h; r.AddCookie(c) })
			if resp.StatusCode != http.StatusOK {
				t.Errorf("the page with the cookie: status %d, want 200", resp.StatusCode)
			}
		})
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

func cookie(token, port string) func(*http.Request) {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: cookiePrefix + port, Value: token}) }
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
