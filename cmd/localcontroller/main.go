// Command localcontroller is Nereid's LocalController: it runs on an edge node,
// keeps the jobs that concern the node, serves the ML workers there and reports
// their status to the GlobalManager.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

// options are the LocalController's command-line settings.
type options struct {
	nodeName      string
	gmAddress     string
	caFile        string
	tokenFile     string
	workerAddress string
	dataDir       string
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODENAME"),
		"Name of the node this LocalController runs on. Defaults to $NODENAME.")
	fs.StringVar(&o.gmAddress, "gm-address", os.Getenv("GM_ADDRESS"),
		"host:port of the GlobalManager's edge endpoint (wss). Defaults to $GM_ADDRESS.")
	fs.StringVar(&o.caFile, "ca-file", "",
		"PEM file of the CA that signed the GlobalManager's serving certificate.")
	fs.StringVar(&o.tokenFile, "token-file", "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"ServiceAccount token, bound to this LocalController's Pod, that proves the node's identity.")
	fs.StringVar(&o.workerAddress, "worker-address", ":9100",
		"Address of the worker API (POST /sedna/workers/{name}/info) that Sedna workers call through LC_SERVER.")
	fs.StringVar(&o.dataDir, "data-dir", "/var/lib/nereid",
		"Directory of the on-disk store (objects received and reports not yet acknowledged).")
}

func (o *options) validate() error {
	var errs []error
	if o.nodeName == "" {
		errs = append(errs, errors.New("--node-name is required (or set $NODENAME)"))
	}
	if o.gmAddress == "" {
		errs = append(errs, errors.New("--gm-address is required (or set $GM_ADDRESS)"))
	}
	return errors.Join(errs...)
}

func main() {
	fs := flag.NewFlagSet("localcontroller", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: localcontroller [flags]

The Nereid LocalController runs on one edge node. It keeps the sedna.io objects
that concern its node in a local store, serves Sedna's worker API to the ML
workers on the node, and sends their reports to the GlobalManager over an
authenticated websocket.

Flags:
`)
		fs.PrintDefaults()
	}
	var o options
	o.addFlags(fs)
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag.

	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "localcontroller: %v\n", err)
		os.Exit(2)
	}
	// The cloud link, the store and the worker API arrive with the channel milestone.
	fmt.Fprintln(os.Stderr, "localcontroller: the cloud link and worker API are not implemented yet")
	os.Exit(1)
}
