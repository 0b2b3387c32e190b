// Package controllers holds the GlobalManager's controllers: one sub-package per
// sedna.io kind, holding only that kind's decisions, and one shared package for
// the plumbing every kind uses (work queue loop, the sync's beginning and its
// status write, expectations, claiming children by controllerRef, pod building
// from templates, conditions, events, the edge report applier).
package controllers
