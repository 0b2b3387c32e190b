// Package localcontroller holds the LocalController that runs on each edge
// node: the cloud link to the GlobalManager, the on-disk store of the objects
// that concern the node, the worker API Sedna's workers call, and one manager
// per kind.
package localcontroller
