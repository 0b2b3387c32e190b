package playworker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Poster sends workers' reports to LocalControllers, each from its pod's
// address.
type Poster struct {
	// Kube reads the pod before each try: its address may come after the
	// pod, and may change if the pod is made again.
	Kube kubernetes.Interface
	// Tries bounds the sends of one report (30 when 0).
	Tries int
	// Interval is the pause between tries (1 s when 0).
	Interval time.Duration
	// Clock times the pauses (the real clock when nil).
	Clock clock.Clock
	// Progress, when set, is told at once when a try fails and another
	// will follow, and again when the cause changes: what the report waits
	// for, so a LocalController that is down is not a silent half minute.
	Progress io.Writer
}

// ErrCannotSpeakAs is the error when this machine cannot send from a worker
// pod's address: it works on the local run, whose pods have loopback
// addresses, and not against a real cluster's pods.
var ErrCannotSpeakAs = errors.New("this machine cannot use the worker pod's address; " +
	"play-worker speaks from the worker pod's address, which works on the local run, where pods have loopback addresses")

// Post sends body, the report of pod namespace/worker, to the LocalController
// at lc (its LC_SERVER URL), from the pod's address. While the
// LocalController refuses it with 403 (it has not been sent the pod or its
// address yet), or the connection fails, it sends it again, up to Tries
// times; another refusal is returned at once with the LocalController's
// reason.
func (p *Poster) Post(ctx context.Context, lc, namespace, worker string, body []byte) error {
	if lc == "" {
		return fmt.Errorf("no LocalController for worker %s's node", worker)
	}
	tries, interval, clk := p.Tries, p.Interval, p.Clock
	if tries <= 0 {
		tries = 30
	}
	if interval <= 0 {
		interval = time.Second
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	var last error
	said, try := "", 1
	for ; ; try++ {
		var waiting string
		waiting, last = p.postOnce(ctx, lc, namespace, worker, body)
		if waiting == "" || try >= tries {
			break
		}
		if p.Progress != nil && waiting != said {
			fmt.Fprintf(p.Progress, "waiting for %s (%v); trying again every %s, up to %d more times\n", waiting, last, interval, tries-try)
			said = waiting
		}
		t := clk.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last try: %w)", ctx.Err(), last)
		case <-t.C():
		}
	}
	if last != nil && try > 1 {
		return fmt.Errorf("after %d tries: %w", try, last)
	}
	return last
}

// postOnce posts a report from worker's pod's address; waiting, when the
// report may be taken on another try, says what that try waits for.
func (p *Poster) postOnce(ctx context.Context, lc, namespace, worker string, body []byte) (waiting string, err error) {
	pod, err := p.Kube.CoreV1().Pods(namespace).Get(ctx, worker, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading pod %s/%s: %w", namespace, worker, err)
	}
	ip := pod.Status.PodIP
	if ip == "" {
		return fmt.Sprintf("pod %s/%s's address", namespace, worker), fmt.Errorf("pod %s/%s has no address yet", namespace, worker)
	}
	url := strings.TrimSuffix(lc, "/") + "/sedna/workers/" + worker + "/info"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("the LocalController URL %q: %w", lc, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ClientFrom(ip).Do(req)
	switch {
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "", fmt.Errorf("sending %s's report from %s: %w", worker, ip, ErrCannotSpeakAs)
	case err != nil && ctx.Err() != nil:
		return "", fmt.Errorf("sending %s's report from %s to %s: %w", worker, ip, lc, err)
	case err != nil:
		return "the LocalController at " + lc + " to answer", fmt.Errorf("sending %s's report from %s to %s: %w", worker, ip, lc, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		err := fmt.Errorf("the LocalController at %s refused %s's report from %s: %s %s", lc, worker, ip, resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode == http.StatusForbidden {
			return fmt.Sprintf("the LocalController at %s to be sent pod %s and its address", lc, worker), err
		}
		return "", err
	}
	return "", nil
}

// ClientFrom is an HTTP client whose connections come from ip: a pod's
// address, which kwok takes from the loopback network, so this machine may
// speak as the pod.
func ClientFrom(ip string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
}
