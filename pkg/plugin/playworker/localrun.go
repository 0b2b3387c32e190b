package playworker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultLocalRun is the local run's state folder: $NEREID_OUT_DIR, else
// _output/local, as make local-up writes it.
func DefaultLocalRun() string {
	if d := os.Getenv("NEREID_OUT_DIR"); d != "" {
		return d
	}
	return filepath.Join("_output", "local")
}

// LocalControllers are the LC_SERVER URLs of the local run's
// LocalControllers, by node, as make local-up writes them in
// <dir>/edge/<node>/lc-server.
func LocalControllers(dir string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "edge", "*", "lc-server"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no LocalControllers in %s: no local run there (make local-up writes edge/<node>/lc-server)", filepath.Join(dir, "edge"))
	}
	urls := map[string]string{}
	for _, f := range files {
		url, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading the LocalController's URL: %w", err)
		}
		urls[filepath.Base(filepath.Dir(f))] = strings.TrimSpace(string(url))
	}
	return urls, nil
}

// LocalControllerOf is the LC_SERVER URL of node's LocalController on the
// local run in dir.
func LocalControllerOf(dir, node string) (string, error) {
	urls, err := LocalControllers(dir)
	if err != nil {
		return "", err
	}
	url, ok := urls[node]
	if !ok {
		return "", fmt.Errorf("the local run in %s has no LocalController on node %q (it has them on %s)", dir, node, strings.Join(sortedKeys(urls), ", "))
	}
	return url, nil
}
