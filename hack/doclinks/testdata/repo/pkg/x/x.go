// Package x is documented in docs/a.md#second-heading and README.md, which
// keeps nothing at README.md#nowhere; docs/gone.md went.
package x
