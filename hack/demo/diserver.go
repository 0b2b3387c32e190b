package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// diResponse is DI-orchestrator's answer to every call of its replicas
// APIs, v1 and v2 alike (common/types Response): data is the call's own.
type diResponse struct {
	Success bool            `json:"success"`
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// diCall is one call of a replicas API, as a DI-engine worker or
// coordinator makes it.
type diCall struct {
	method, url string
	// token goes as a bearer token; "" sends none (a v1 coordinator, which
	// the v1 server knows by its pod's address).
	token string
	// body is sent as JSON; nil sends none.
	body any
	// retryForbidden sends the call again on 403 too, as on 5xx: a server
	// that knows its caller by its pod's address may not have seen the
	// pod's address yet.
	retryForbidden bool
}

// request is the HTTP request of c.
func (c diCall) request(ctx context.Context) (*http.Request, error) {
	var body io.Reader
	if c.body != nil {
		data, err := json.Marshal(c.body)
		if err != nil {
			return nil, fmt.Errorf("encoding the body of %s %s: %w", c.method, c.url, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, c.url, body)
	if err != nil {
		return nil, err
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// errDIRefused is a call the server answered, but not with success.
var errDIRefused = errors.New("refused")

// decodeDIResponse reads the answer to c: an error unless it is 200 with
// success, wrapping errDIRefused when the server answered in DI's shape.
func (c diCall) decodeDIResponse(status int, raw []byte) (diResponse, error) {
	var r diResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("%s %s: %d, not DI's answer: %q", c.method, c.url, status, truncate(raw, 200))
	}
	if status != http.StatusOK || !r.Success {
		return r, fmt.Errorf("%s %s: %w with %d (code %d): %s", c.method, c.url, errDIRefused, status, r.Code, r.Message)
	}
	return r, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// do makes the call with client, again while the server cannot be reached
// or answers 5xx (it starts as the GlobalManager leads; and 403 with
// retryForbidden), for up to retryFor, and returns the answer.
func (c diCall) do(ctx context.Context, client *http.Client, retryFor time.Duration) (diResponse, error) {
	deadline := time.Now().Add(retryFor)
	for {
		status, raw, err := c.once(ctx, client)
		if err == nil && status < 500 && (status != http.StatusForbidden || !c.retryForbidden) {
			return c.decodeDIResponse(status, raw)
		}
		if err == nil {
			_, err = c.decodeDIResponse(status, raw)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return diResponse{}, err
		}
		select {
		case <-ctx.Done():
			return diResponse{}, err
		case <-time.After(time.Second):
		}
	}
}

func (c diCall) once(ctx context.Context, client *http.Client) (int, []byte, error) {
	req, err := c.request(ctx)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", c.method, c.url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", c.method, c.url, err)
	}
	return resp.StatusCode, raw, nil
}

// trustingClient is an HTTP client that trusts the CA in caPEM, as a
// DIJob pod does with its DI_SERVER_CA_FILE; without a CA it trusts the
// system's roots.
func trustingClient(caPEM string) (*http.Client, error) {
	t := &http.Transport{DisableKeepAlives: true}
	if caPEM != "" {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(caPEM)) {
			return nil, errors.New("the replicas API's CA is no PEM certificate")
		}
		t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: t}, nil
}
