package common

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// created is what one sync created, said in one SuccessfulCreate event. A
// job's first sync makes its Service, its pods and its gang's objects at
// once; one event naming them all is one API write where there were three or
// four, and reads better in kubectl describe.
type created struct {
	mu    sync.Mutex
	kinds []string            // nouns in the order first created
	names map[string][]string // by noun
	pods  []*corev1.Pod       // as the API server returned them
}

type createdKey struct{}

// withCreated returns a context whose creates (through Children) are
// gathered into the returned record instead of each recording its event.
func withCreated(ctx context.Context) (context.Context, *created) {
	c := &created{names: map[string][]string{}}
	return context.WithValue(ctx, createdKey{}, c), c
}

// noteCreated adds names of children of one kind (a lower-case noun:
// "pod", "service") to ctx's record. It returns false when ctx has none; the
// caller then records its own event.
func noteCreated(ctx context.Context, noun string, names ...string) bool {
	return notePods(ctx, noun, names, nil)
}

// notePods is noteCreated that also keeps the pods made, for PodsMade.
func notePods(ctx context.Context, noun string, names []string, pods []*corev1.Pod) bool {
	c, _ := ctx.Value(createdKey{}).(*created)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.names[noun]; !ok {
		c.kinds = append(c.kinds, noun)
	}
	c.names[noun] = append(c.names[noun], names...)
	c.pods = append(c.pods, pods...)
	return true
}

// madePods returns the pods created so far.
func (c *created) madePods() []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*corev1.Pod(nil), c.pods...)
}

// message is the event's message ("Created service a; pods b, c, d"), empty
// when nothing was created.
func (c *created) message() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.kinds) == 0 {
		return ""
	}
	parts := make([]string, 0, len(c.kinds))
	for _, noun := range c.kinds {
		parts = append(parts, nameList(noun, c.names[noun]))
	}
	return "Created " + strings.Join(parts, "; ")
}

// nameList names children of one kind: "pod a", "pods a, b", or the first
// ten and how many more.
func nameList(noun string, names []string) string {
	names = append([]string(nil), names...)
	sort.Strings(names)
	if len(names) == 1 {
		return noun + " " + names[0]
	}
	const shown = 10
	if len(names) <= shown {
		return noun + "s " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%d %ss: %s and %d more", len(names), noun, strings.Join(names[:shown], ", "), len(names)-shown)
}
