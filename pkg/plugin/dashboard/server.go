package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

// Source is what the dashboard shows: the cluster as the user sees it
// (NewClusterSource), or fixed values in tests.
type Source interface {
	// Snapshot is the fleet and the jobs now.
	Snapshot(ctx context.Context) (*view.Snapshot, error)
	// Rounds are a job's rounds per node.
	Rounds(ctx context.Context, kind, namespace, name string) (*view.Rounds, error)
	// Events are the events about a job, oldest first.
	Events(ctx context.Context, kind, namespace, name string) ([]Event, error)
}

// web holds the page: one HTML file, its script and its style sheet.
//
//go:embed web/index.html web/app.js web/style.css
var web embed.FS

// assets are the files the dashboard serves, by path, with their types.
var assets = map[string]string{
	"/":          "text/html; charset=utf-8",
	"/app.js":    "text/javascript; charset=utf-8",
	"/style.css": "text/css; charset=utf-8",
}

// kindName is a Kubernetes kind's shape.
var kindName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)

// NewHandler is the dashboard of src behind its guard (guard.go): token,
// Host check for a server listening on addr, GET only.
func NewHandler(src Source, token string, addr netip.AddrPort) http.Handler {
	mux := http.NewServeMux()
	for path, contentType := range assets {
		mux.Handle("GET "+exact(path), asset(path, contentType))
	}
	mux.HandleFunc("GET /api/snapshot", func(w http.ResponseWriter, r *http.Request) {
		s, err := src.Snapshot(r.Context())
		answer(w, s, err)
	})
	mux.HandleFunc("GET /api/rounds", func(w http.ResponseWriter, r *http.Request) {
		kind, ns, name, err := jobParams(r)
		if err == nil && !view.HasRounds(kind) {
			err = fmt.Errorf("kind %q has no rounds", kind)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rounds, err := src.Rounds(r.Context(), kind, ns, name)
		answer(w, rounds, err)
	})
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		kind, ns, name, err := jobParams(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		events, err := src.Events(r.Context(), kind, ns, name)
		if events == nil {
			events = []Event{}
		}
		answer(w, events, err)
	})
	return newGuard(mux, token, addr)
}

// exact is a mux pattern that matches path only ("/" would match all).
func exact(path string) string {
	if path == "/" {
		return "/{$}"
	}
	return path
}

// asset serves one embedded file.
func asset(path, contentType string) http.Handler {
	file := "web" + path
	if path == "/" {
		file = "web/index.html"
	}
	body, err := fs.ReadFile(web, file)
	if err != nil {
		panic(fmt.Sprintf("dashboard asset %s is not embedded: %v", file, err))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	})
}

// jobParams are a job's kind, namespace and name from the query, checked.
func jobParams(r *http.Request) (kind, namespace, name string, err error) {
	q := r.URL.Query()
	kind, namespace, name = q.Get("kind"), q.Get("namespace"), q.Get("name")
	if !kindName.MatchString(kind) {
		return "", "", "", fmt.Errorf("kind %q: want a kind such as FederatedLearningJob", kind)
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return "", "", "", fmt.Errorf("namespace %q: %s", namespace, errs[0])
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", "", fmt.Errorf("name %q: %s", name, errs[0])
	}
	return kind, namespace, name, nil
}

// answer writes v as JSON, or err: the cluster's refusal or absence is
// the page's to show, as text.
func answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}
