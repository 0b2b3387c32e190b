package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/klog/v2/textlogger"

	"github.com/nereid-ml/nereid/pkg/localcontroller/cloudlink"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// simulatedLC is an in-process LocalController without its worker API: a
// real cloud link and a real on-disk store of its own.
type simulatedLC struct {
	node  string
	store *store.Store
	link  *cloudlink.Link
}

// fleet is the simulated LocalControllers, one per edge node.
type fleet struct {
	lcs     []*simulatedLC
	cancel  context.CancelFunc
	running sync.WaitGroup
	logFile *os.File
}

// newFleet opens a store in dir for each node and builds its link to the
// hub at url; nothing connects before start. The links log to logPath.
func newFleet(url, caFile, dir, logPath string, nodes, tokenFiles []string) (*fleet, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(logFile)))
	f := &fleet{logFile: logFile}
	for i, node := range nodes {
		st, err := store.Open(filepath.Join(dir, node, "localcontroller.db"), store.Options{})
		if err != nil {
			f.close()
			return nil, err
		}
		link, err := cloudlink.New(logger.WithValues("node", node), cloudlink.Config{
			URL: url, CAFile: caFile, TokenFile: tokenFiles[i], Node: node,
		}, st, nil)
		if err != nil {
			_ = st.Close()
			f.close()
			return nil, err
		}
		f.lcs = append(f.lcs, &simulatedLC{node: node, store: st, link: link})
	}
	return f, nil
}

// start runs every link, all at once, as a fleet does after a cloud outage.
func (f *fleet) start(ctx context.Context) {
	ctx, f.cancel = context.WithCancel(ctx)
	for _, lc := range f.lcs {
		f.running.Go(func() { _ = lc.link.Run(ctx) }) // Run returns nil once ctx is done
	}
}

// synced counts the links connected and synced on a connection made at or
// after since.
func (f *fleet) synced(since time.Time) int {
	n := 0
	for _, lc := range f.lcs {
		if s := lc.link.Status(); s.Connected && s.Synced && !s.Since.Before(since) {
			n++
		}
	}
	return n
}

// waitSynced waits until every link is synced on a connection made at or
// after since, and returns when it saw that; on a timeout it says how many
// were.
func (f *fleet) waitSynced(ctx context.Context, since time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		n := f.synced(since)
		if n == len(f.lcs) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("after %s only %d of %d LocalControllers were synced (%s)", timeout, n, len(f.lcs), f.sampleError())
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sampleError is what one link that is not synced says about itself.
func (f *fleet) sampleError() string {
	for _, lc := range f.lcs {
		if s := lc.link.Status(); !s.Synced {
			return lc.node + ": " + s.String()
		}
	}
	return "all synced now"
}

// stop stops the links (each says goodbye to the hub) and closes the stores;
// a link that does not return within timeout keeps its store open.
func (f *fleet) stop(timeout time.Duration) error {
	if f.cancel != nil {
		f.cancel()
		done := make(chan struct{})
		go func() { f.running.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(timeout):
			return fmt.Errorf("the cloud links did not stop within %s", timeout)
		}
		f.cancel = nil
	}
	f.close()
	return nil
}

func (f *fleet) close() {
	for _, lc := range f.lcs {
		_ = lc.store.Close()
	}
	f.lcs = nil
	_ = f.logFile.Close()
}
