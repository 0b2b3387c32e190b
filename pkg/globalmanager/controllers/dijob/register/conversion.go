package register

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	"github.com/nereid-ml/nereid/pkg/globalmanager/owner"
	"github.com/nereid-ml/nereid/pkg/globalmanager/selfcert"
)

// conversionFlags are the flags of the DIJob CRD's conversion webhook.
type conversionFlags struct {
	address, service, tlsSecret string
}

// DefaultConversionTLSSecret is the Secret of the conversion webhook's
// certificate: the plain manifests' name, which their Role names.
const DefaultConversionTLSSecret = "nereid-dijob-conversion-tls"

func (f *conversionFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.address, "dijob-conversion-address", "127.0.0.1:0",
		"Address of the DIJob CRD's conversion webhook (HTTPS, POST "+conversion.Path+"), which converts DIJobs between diengine.opendilab.org/v1alpha1 and v2alpha1 "+
			"for the API server; served where the DIJob CRD is. The GlobalManager points the CRD's spec.conversion.webhook.clientConfig at it, with its CA: "+
			"at --dijob-conversion-service, else at https://<this address's host, 127.0.0.1 when unspecified>:<port>"+conversion.Path+" (port 0 picks a free one). "+
			"Empty serves no webhook (v1alpha1 DIJobs then neither apply nor read).")
	fs.StringVar(&f.service, "dijob-conversion-service", "",
		"<namespace>/<name>:<port> of the Service in front of --dijob-conversion-address, which the DIJob CRD's clientConfig names (the API server calls "+
			"https://<name>.<namespace>.svc:<port>"+conversion.Path+"). Empty: a URL of --dijob-conversion-address.")
	fs.StringVar(&f.tlsSecret, "dijob-conversion-tls-secret", DefaultConversionTLSSecret,
		"Secret in --edge-namespace holding the conversion webhook's serving certificate and its CA, which the GlobalManager makes the first time and "+
			"reissues from the same CA when it nears expiry or lacks the webhook's host; the CA goes into the DIJob CRD's clientConfig.caBundle.")
}

func (f *conversionFlags) validate() []error {
	if f.address == "" {
		return nil
	}
	var errs []error
	if _, _, err := net.SplitHostPort(f.address); err != nil {
		errs = append(errs, fmt.Errorf("--dijob-conversion-address %q: %w", f.address, err))
	}
	if f.service != "" {
		if _, err := parseServiceReference(f.service); err != nil {
			errs = append(errs, fmt.Errorf("--dijob-conversion-service: %w", err))
		}
	}
	if msgs := validation.IsDNS1123Subdomain(f.tlsSecret); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--dijob-conversion-tls-secret %q: %s", f.tlsSecret, strings.Join(msgs, "; ")))
	}
	return errs
}

// parseServiceReference reads <namespace>/<name>:<port>.
func parseServiceReference(s string) (*conversion.ServiceReference, error) {
	ns, rest, ok := strings.Cut(s, "/")
	name, port, ok2 := strings.Cut(rest, ":")
	p, err := strconv.ParseInt(port, 10, 32)
	if !ok || !ok2 || err != nil || p < 1 || p > 65535 || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Label(name)) > 0 {
		return nil, fmt.Errorf("%q: want <namespace>/<name>:<port>", s)
	}
	return &conversion.ServiceReference{Namespace: ns, Name: name, Port: int32(p)}, nil
}

// conversionWebhook serves the DIJob CRD's conversion and keeps the CRD
// pointed at it.
type conversionWebhook struct {
	address string
	service *conversion.ServiceReference
	tls     *tls.Config
	ca      []byte
	crd     conversion.CRD
}

// build makes the webhook's certificate, from the Secret.
func (f *conversionFlags) build(ctx context.Context, d kinds.Deps) (*conversionWebhook, error) {
	if f.address == "" {
		return nil, nil
	}
	w := &conversionWebhook{address: f.address, crd: conversion.RESTCRD{Client: d.Kube.Discovery().RESTClient()}}
	var hosts []string
	if f.service != "" {
		w.service, _ = parseServiceReference(f.service) // validated
		hosts = append(hosts, w.service.Name+"."+w.service.Namespace+".svc")
	} else if host := urlHost(f.address); host != "" {
		hosts = append(hosts, host)
	}
	cert, ca, err := selfcert.Secret{
		Client: d.Kube, Namespace: d.EdgeNamespace, Name: f.tlsSecret, Hostnames: hosts, Subject: "nereid-dijob-conversion",
		Own: func(m *metav1.ObjectMeta) bool { return owner.OwnedBy(m, d.Owner()) },
	}.Certificate(ctx)
	if err != nil {
		return nil, fmt.Errorf("the DIJob conversion webhook's certificate (--dijob-conversion-tls-secret): %w", err)
	}
	w.tls, w.ca = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ca
	return w, nil
}

// urlHost is the host the API server calls for a webhook on address: its
// own, 127.0.0.1 when it names none or an unspecified one.
func urlHost(address string) string {
	host, _, _ := net.SplitHostPort(address)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "127.0.0.1"
	}
	return host
}

// run listens, points the CRD at the webhook and serves until ctx ends.
func (w *conversionWebhook) run(ctx context.Context) error {
	ln, err := net.Listen("tcp", w.address)
	if err != nil {
		return fmt.Errorf("listening on --dijob-conversion-address %s: %w", w.address, err)
	}
	want := conversion.ClientConfig{Service: w.service, CABundle: w.ca}
	if w.service == nil {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		want.URL = (&url.URL{Scheme: "https", Host: net.JoinHostPort(urlHost(w.address), port), Path: conversion.Path}).String()
	}
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		conversion.Keep(ctx, w.crd, want, clock.RealClock{})
	}()
	err = conversion.Serve(ctx, ln, w.tls)
	<-kept
	return err
}
