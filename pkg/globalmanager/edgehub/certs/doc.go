// Package certs is the edge hub's serving certificate: read from files the
// operator gives, or kept in a Secret of the hub's namespace and generated
// the first time (package selfcert), in which case the CA that signed it is
// published, in a ConfigMap and optionally a file, for LocalControllers to
// trust. Replicas racing converge on one certificate and one published CA.
package certs
