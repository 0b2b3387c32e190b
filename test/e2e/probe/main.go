// Command probe is the end-to-end tests' own container on real nodes: a
// static binary that serves who it is and asks others, so that a test sees
// what a pod sees (its address, cluster DNS, Services) without an image of a
// distribution.
//
// Usage:
//
//	probe serve ADDR        answer every request with "<hostname> <remote address>"
//	probe get URL           print the body of GET URL; exit 1 unless 200
//	probe lookup NAME       print NAME's addresses as the pod's resolver finds them
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: probe serve ADDR | get URL | lookup NAME")
		os.Exit(2)
	}
	arg := os.Args[2]
	switch os.Args[1] {
	case "serve":
		host, _ := os.Hostname()
		srv := &http.Server{Addr: arg, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s\n", host, r.RemoteAddr)
		})}
		fmt.Println("serving on", arg)
		fail(srv.ListenAndServe())
	case "get":
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(arg)
		fail(err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		fmt.Print(string(body))
		if resp.StatusCode != http.StatusOK {
			fail(fmt.Errorf("GET %s: %s", arg, resp.Status))
		}
	case "lookup":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, arg)
		fail(err)
		fmt.Println(strings.Join(addrs, " "))
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}
