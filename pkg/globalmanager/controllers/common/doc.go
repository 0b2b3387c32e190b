// Package common is the plumbing every GlobalManager controller shares, written
// once: the work queue loop, expectations, claiming children by controllerRef,
// building worker pods from templates, conditions, events, and metrics. A kind's
// package holds only that kind's decisions.
package common
