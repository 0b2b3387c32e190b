package edgeproto

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Type names a message type on the wire (the envelope's "type").
type Type string

// The message types. The comment says who sends it.
const (
	TypeHello     Type = "hello"     // LC → GM, first message on a connection
	TypeInventory Type = "inventory" // LC → GM, right after a Hello whose More is set
	TypeUpsert    Type = "upsert"    // GM → LC
	TypeDelete    Type = "delete"    // GM → LC
	TypeSynced    Type = "synced"    // GM → LC
	TypeAck       Type = "ack"       // LC → GM
	TypeReport    Type = "report"    // LC → GM
	TypeReportAck Type = "reportAck" // GM → LC
	TypeHeartbeat Type = "heartbeat" // both ways
)

// Message is one of the message types of this package: *Hello, *Inventory,
// *Upsert, *Delete, *Synced, *Ack, *Report, *ReportAck or *Heartbeat. Decode returns
// one of them; receivers switch on the dynamic type.
type Message interface {
	// Type is the wire type of the message.
	Type() Type
	// validate checks the fields Decode and Encode require; it also keeps the
	// set of messages closed to this package.
	validate() error
}

// newMessage returns an empty message of type t, or nil when t is unknown.
func newMessage(t Type) Message {
	switch t {
	case TypeHello:
		return new(Hello)
	case TypeInventory:
		return new(Inventory)
	case TypeUpsert:
		return new(Upsert)
	case TypeDelete:
		return new(Delete)
	case TypeSynced:
		return new(Synced)
	case TypeAck:
		return new(Ack)
	case TypeReport:
		return new(Report)
	case TypeReportAck:
		return new(ReportAck)
	case TypeHeartbeat:
		return new(Heartbeat)
	}
	return nil
}

// ObjectRef names an object that concerns an edge node. Kind is the object's
// kind as in its TypeMeta (FederatedLearningJob, Model, …); the kinds the
// channel carries are unique across their API groups, so the group is implied.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String is "Kind namespace/name", for logs.
func (r ObjectRef) String() string {
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

func (r ObjectRef) check() error {
	switch {
	case r.Kind == "":
		return errors.New("kind is required")
	case r.Namespace == "":
		return errors.New("namespace is required")
	case r.Name == "":
		return errors.New("name is required")
	}
	return tooLong(bounded{"kind", r.Kind, MaxKindBytes}, bounded{"namespace", r.Namespace, MaxNamespaceBytes},
		bounded{"name", r.Name, MaxNameBytes})
}

// bounded is a field's name, value and bound in bytes.
type bounded struct {
	field, value string
	max          int
}

// tooLong says which of fields is the first longer than its bound, if any.
func tooLong(fields ...bounded) error {
	for _, f := range fields {
		if len(f.value) > f.max {
			return fmt.Errorf("%s of %d bytes, more than %d", f.field, len(f.value), f.max)
		}
	}
	return nil
}

// Bounds of an ObjectRef's fields, Kubernetes' own (a kind is a DNS label,
// a namespace too, a name at most a DNS subdomain), and of a
// resourceVersion (an etcd revision is at most 20 digits): what a node
// states it holds costs the GlobalManager at most this much an entry.
const (
	MaxKindBytes            = 63
	MaxNamespaceBytes       = 63
	MaxNameBytes            = 253
	MaxResourceVersionBytes = 64
)

// ObjectVersion is one version of an object: its ref and the resourceVersion
// the API server gave that version. It is how both ends name what they hold,
// what is sent and what is acknowledged.
type ObjectVersion struct {
	ObjectRef
	ResourceVersion string `json:"resourceVersion"`
	// Digest is the GlobalManager's digest of the object as it sends it,
	// without its resourceVersion (see the GlobalManager's edge hub): two
	// versions with the same digest differ only in what the edge does not
	// use (status, most often), so a LocalController that holds one needs
	// nothing of the other. The LocalController stores it with the object
	// and states it back in its Hello and Acks; "" from one that predates
	// it, and then the resourceVersion alone tells versions apart.
	Digest string `json:"digest,omitempty"`
	// Workers is the WorkersDigest of the object's worker pods on the node
	// ("" when it has none there): a pod that comes or goes is a new version
	// on that node, though the object is unchanged.
	Workers string `json:"workers,omitempty"`
}

// String is "Kind namespace/name@resourceVersion[+workers]", for logs.
func (v ObjectVersion) String() string {
	s := v.ObjectRef.String() + "@" + v.ResourceVersion
	if v.Workers != "" {
		s += "+" + v.Workers
	}
	return s
}

func (v ObjectVersion) check() error {
	if err := v.ObjectRef.check(); err != nil {
		return err
	}
	if v.ResourceVersion == "" {
		return errors.New("resourceVersion is required")
	}
	return tooLong(bounded{"resourceVersion", v.ResourceVersion, MaxResourceVersionBytes}, bounded{"digest", v.Digest, MaxDigestBytes},
		bounded{"workers digest", v.Workers, MaxDigestBytes})
}

// MaxDigestBytes bounds ObjectVersion.Digest: a GlobalManager's digests are
// ObjectDigest's.
const MaxDigestBytes = 64

// ObjectDigest is the digest of an object's JSON as the GlobalManager sends
// it, taken without its resourceVersion: what ObjectVersion.Digest says.
func ObjectDigest(jsonWithoutResourceVersion []byte) string {
	sum := sha256.Sum256(jsonWithoutResourceVersion)
	return hex.EncodeToString(sum[:16])
}

// MaxStoreIdentityBytes bounds Hello.Store, which the GM records in status.
const MaxStoreIdentityBytes = 64

// DefaultMaxOutboxReports is how many reports a LocalController's outbox
// holds unless told otherwise: the reports a Hello's LastReportID may be
// ahead of what the GM has acknowledged of the store (the GM's bound on a
// Hello's claim is read from it).
const DefaultMaxOutboxReports = 100000

// Hello is the LC's first message on every connection.
type Hello struct {
	// Node is the node the LC claims to run on. The GM checks it against the
	// identity the connection authenticated with.
	Node string `json:"node"`
	// Store is the identity of the LC's store, the one its outbox and so its
	// report IDs belong to: a store that is wiped or replaced starts its IDs
	// again at 1 under a new identity. The GM applies reports idempotently by
	// node, store and ID. An opaque string (a UUID) of at most
	// MaxStoreIdentityBytes, required: both ends of version 1 ship together,
	// and a GM that took IDs without their store would ignore a new store's
	// reports as already applied.
	Store string `json:"store"`
	// StoreKey is the store's secret, 32 random bytes in hex made with the
	// store and kept in it, which only the node holds; Store must be its
	// StoreIdentity. So a session can use no store identity but one whose
	// key it holds: one it created, or that its node's disk holds. The
	// identity is public (the GM writes it on the node's Lease); the key
	// goes only to the GM, over the TLS connection.
	StoreKey string `json:"storeKey"`
	// LastReportID is the highest ID the store has given a report (0 for
	// none). Every report the LC sends after the Hello is one it held then
	// or one it takes after, in order, so the k-th report of the connection
	// has an ID of at most LastReportID+k: the GM refuses an ID past it as
	// one that cannot be real (an ID far ahead would make the store's later
	// reports look applied).
	LastReportID uint64 `json:"lastReportID,omitempty"`
	// Inventory is every object the LC holds in its store, at the version it
	// holds, each ref at most once; the GM answers with the difference. When
	// it does not fit in one frame (a frame holds about 2,500 entries with
	// the longest names, ten thousand with short ones), this is its first
	// part and More is set: see EncodeHello.
	Inventory []ObjectVersion `json:"inventory,omitempty"`
	// More says that the inventory goes on in Inventory messages, which
	// follow the Hello at once, the last of them with More unset.
	More bool `json:"more,omitempty"`
}

// Type is TypeHello.
func (*Hello) Type() Type { return TypeHello }

func (h *Hello) validate() error {
	switch {
	case h.Node == "":
		return errors.New("node is required")
	case h.Store == "":
		return errors.New("store is required")
	case len(h.Store) > MaxStoreIdentityBytes:
		return fmt.Errorf("store is %d bytes, the limit is %d", len(h.Store), MaxStoreIdentityBytes)
	case h.LastReportID > math.MaxInt64:
		return fmt.Errorf("lastReportID %d is more than %d", h.LastReportID, int64(math.MaxInt64))
	}
	if err := checkInventory(h.Inventory, nil); err != nil {
		return err
	}
	switch {
	case h.StoreKey == "":
		return errors.New("storeKey is required: is the LocalController older than the GlobalManager? Upgrade them together")
	case !validStoreKey(h.StoreKey):
		return fmt.Errorf("storeKey is not %d lowercase hexadecimal digits", 2*StoreKeyBytes)
	case h.Store != StoreIdentity(h.StoreKey):
		return fmt.Errorf("store %q is not the identity of its storeKey", clip(h.Store))
	}
	return nil
}

// StoreKeyBytes is the length of a store's key (Hello.StoreKey), in bytes.
const StoreKeyBytes = 32

// NewStoreKey makes a store's key: StoreKeyBytes random bytes, in hex.
func NewStoreKey() string {
	b := make([]byte, StoreKeyBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// StoreIdentity is the identity of the store whose key is key: a digest of
// it, which tells nothing of the key.
func StoreIdentity(key string) string {
	sum := sha256.Sum256([]byte("nereid store identity\x00" + key))
	return hex.EncodeToString(sum[:16])
}

func validStoreKey(key string) bool {
	if len(key) != 2*StoreKeyBytes {
		return false
	}
	for _, c := range key {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkInventory checks the entries of one part of an inventory, and that
// none is in seen (the refs of the parts before it, nil for none). It adds
// the entries' refs to seen when seen is not nil.
func checkInventory(inv []ObjectVersion, seen map[ObjectRef]struct{}) error {
	if seen == nil {
		seen = make(map[ObjectRef]struct{}, len(inv))
	}
	for i, v := range inv {
		if err := v.check(); err != nil {
			return fmt.Errorf("inventory[%d]: %w", i, err)
		}
		if _, dup := seen[v.ObjectRef]; dup {
			return fmt.Errorf("inventory[%d]: %s is listed twice", i, clip(v.ObjectRef.String()))
		}
		seen[v.ObjectRef] = struct{}{}
	}
	return nil
}

func (h *Hello) normalize() {
	if len(h.Inventory) == 0 {
		h.Inventory = nil
	}
}

// Source is where a report comes from: the node whose LC forwarded it, as
// its connection authenticated, and the identity of that LC's store, as its
// Hello said (Hello.Store). A report's ID is unique within its Source.
type Source struct {
	Node  string
	Store string
}

// Inventory continues the inventory of a Hello whose More is set. The
// entries of a Hello and its Inventory messages together list each ref at
// most once, and number at most MaxInventory.
type Inventory struct {
	// Inventory is the next part of the LC's inventory, at least one entry.
	Inventory []ObjectVersion `json:"inventory"`
	// More says that another Inventory follows; the last one has it unset.
	More bool `json:"more,omitempty"`
}

// Type is TypeInventory.
func (*Inventory) Type() Type { return TypeInventory }

func (v *Inventory) validate() error {
	if len(v.Inventory) == 0 {
		return errors.New("inventory is required (at least one entry)")
	}
	return checkInventory(v.Inventory, nil)
}

// Upsert carries the latest version of an object that concerns the LC's node.
// The LC stores it under its ref, replacing what it held, persists it, and
// acknowledges its ObjectVersion.
type Upsert struct {
	ObjectVersion
	// Object is the object as the API server returned it (apiVersion and
	// kind may be absent, as in an informer's cache; the GM leaves out what
	// the edge does not use). Its metadata's namespace, name and
	// resourceVersion, and its kind when present, must equal the ref's.
	Object json.RawMessage `json:"object"`
	// WorkerPods are the object's worker pods on the LC's node, sorted by
	// name: the only workers whose reports the LC takes for the object, each
	// only from its pod's addresses. Their WorkersDigest is
	// ObjectVersion.Workers.
	WorkerPods []Worker `json:"workerPods,omitempty"`
}

// Worker is one of an object's worker pods on a node: its name, and the
// addresses its reports come from. Sedna's workers send no credentials, so
// the address is what tells a worker from anything else on the node that
// reaches the worker API: the pod's IPs (status.podIPs), which for a
// hostNetwork pod are its node's. IPs is empty while the pod has none yet
// (it is starting) and once it has finished (Done: its address may be given
// to another pod, and it reports no more).
type Worker struct {
	Name string   `json:"name"`
	IPs  []string `json:"ips,omitempty"`
	// Done says the pod has finished: no report is taken for it any more
	// (its last ones were, before it finished), and it is not waited for.
	Done bool `json:"done,omitempty"`
}

// MaxWorkerIPs bounds a worker's addresses: a pod has one per IP family.
const MaxWorkerIPs = 2

// Type is TypeUpsert.
func (*Upsert) Type() Type { return TypeUpsert }

func (u *Upsert) validate() error {
	if err := u.ObjectVersion.check(); err != nil {
		return err
	}
	if err := checkObject("object", u.Object); err != nil {
		return err
	}
	if err := checkWorkers(u.WorkerPods); err != nil {
		return err
	}
	if d := WorkersDigest(u.WorkerPods); d != u.Workers {
		if len(u.WorkerPods) == 0 {
			// A GlobalManager from before workerPods sends workerNames.
			return fmt.Errorf("workers %q is not the digest of workerPods, which is empty: is the GlobalManager older than this LocalController? Upgrade them together", clip(u.Workers))
		}
		return fmt.Errorf("workers %q is not the digest %q of workerPods", clip(u.Workers), d)
	}
	// The LC files the object under the ref and later reports the ref and
	// version in its inventory; an object that disagrees with its ref would be
	// stored under the wrong key or resent forever.
	var obj struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Namespace       string `json:"namespace"`
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(u.Object, &obj); err != nil {
		return fmt.Errorf("object: %s", describeJSONError(err))
	}
	m := obj.Metadata
	switch {
	case obj.Kind != "" && obj.Kind != u.Kind:
		return mismatch("object kind", obj.Kind, "kind", u.Kind)
	case m.Namespace != u.Namespace:
		return mismatch("object metadata.namespace", m.Namespace, "namespace", u.Namespace)
	case m.Name != u.Name:
		return mismatch("object metadata.name", m.Name, "name", u.Name)
	case m.ResourceVersion != u.ResourceVersion:
		return mismatch("object metadata.resourceVersion", m.ResourceVersion, "resourceVersion", u.ResourceVersion)
	}
	return nil
}

func (u *Upsert) normalize() {
	u.Object = compact(u.Object)
	if len(u.WorkerPods) == 0 {
		u.WorkerPods = nil
	}
}

// MaxWorkers bounds the worker pods an Upsert names: far more than any job
// runs on one node.
const MaxWorkers = 10000

// checkWorkers checks that workers are pods sorted by name, distinct, each
// with at most MaxWorkerIPs distinct addresses in canonical form (the LC
// compares them with the addresses it is called from).
func checkWorkers(workers []Worker) error {
	if len(workers) > MaxWorkers {
		return fmt.Errorf("workerPods: %d pods, at most %d", len(workers), MaxWorkers)
	}
	for i, w := range workers {
		if w.Name == "" || len(w.Name) > MaxNameBytes {
			return fmt.Errorf("workerPods[%d].name: not a pod name", i)
		}
		if i > 0 && workers[i-1].Name >= w.Name {
			return fmt.Errorf("workerPods[%d].name: %q is not after %q (the pods are sorted by name and distinct)", i, clip(w.Name), clip(workers[i-1].Name))
		}
		if len(w.IPs) > MaxWorkerIPs {
			return fmt.Errorf("workerPods[%d].ips: %d addresses, at most %d", i, len(w.IPs), MaxWorkerIPs)
		}
		if w.Done && len(w.IPs) > 0 {
			return fmt.Errorf("workerPods[%d]: a pod that is done has no address", i)
		}
		for j, ip := range w.IPs {
			if !canonicalIP(ip) || (j > 0 && w.IPs[0] == ip) {
				return fmt.Errorf("workerPods[%d].ips[%d]: %q is not a distinct IP address in canonical form", i, j, clip(ip))
			}
		}
	}
	return nil
}

// canonicalIP says whether s is an IP address without a zone, written as
// netip writes it: two such strings are the same address if and only if
// they are equal.
func canonicalIP(s string) bool {
	addr, err := netip.ParseAddr(s)
	return err == nil && addr.Zone() == "" && addr.String() == s
}

// WorkersDigest is a short digest of workers (sorted by name), their names
// and addresses, "" for none: what an ObjectVersion says of the workers an
// Upsert named, so that a pod's new address is a new version on its node.
func WorkersDigest(workers []Worker) string {
	if len(workers) == 0 {
		return ""
	}
	h := sha256.New()
	for _, w := range workers {
		h.Write([]byte(w.Name))
		for _, ip := range w.IPs {
			h.Write([]byte{1})
			h.Write([]byte(ip))
		}
		if w.Done {
			h.Write([]byte{2})
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// Admits says whether a report of worker may come from addr: worker is one
// of workers and addr one of its addresses (an IPv4 address mapped into
// IPv6, as a dual-stack listener may give it, counts as the IPv4 one).
func Admits(workers []Worker, worker string, addr netip.Addr) bool {
	i, found := slices.BinarySearchFunc(workers, worker, func(w Worker, name string) int { return strings.Compare(w.Name, name) })
	if !found {
		return false
	}
	addr = addr.Unmap().WithZone("")
	for _, ip := range workers[i].IPs {
		if a, err := netip.ParseAddr(ip); err == nil && a.Unmap() == addr {
			return true
		}
	}
	return false
}

func mismatch(field, got, refField, want string) error {
	return fmt.Errorf("%s %q does not match %s %q", field, clip(got), refField, clip(want))
}

// Delete tells the LC that an object no longer concerns its node (deleted, or
// moved to another node). The LC deletes whatever version it holds under the
// ref, persists that, and acknowledges the Delete's ObjectVersion.
type Delete struct {
	// ObjectVersion is the ref and the last resourceVersion the GM knew (for an
	// inventory entry, the version the LC reported).
	ObjectVersion
}

// Type is TypeDelete.
func (*Delete) Type() Type { return TypeDelete }

func (d *Delete) validate() error { return d.ObjectVersion.check() }

// Synced follows the whole difference the GM sends in answer to a Hello: once
// the LC has applied everything before it, its store holds exactly what
// concerns its node.
type Synced struct{}

// Type is TypeSynced.
func (*Synced) Type() Type { return TypeSynced }

func (*Synced) validate() error { return nil }

// Ack acknowledges Upserts and Deletes the LC has persisted.
type Ack struct {
	// Objects are the acknowledged versions, at least one. The same ref may
	// appear at several versions.
	Objects []ObjectVersion `json:"objects"`
}

// Type is TypeAck.
func (*Ack) Type() Type { return TypeAck }

func (a *Ack) validate() error {
	if len(a.Objects) == 0 {
		return errors.New("objects is required (at least one)")
	}
	for i, v := range a.Objects {
		if err := v.check(); err != nil {
			return fmt.Errorf("objects[%d]: %w", i, err)
		}
	}
	return nil
}

// Report forwards one worker report from the LC's outbox.
//
// The LC makes what it persists with OutboxRecord, which fails for a report
// that would not encode into a frame under any ID, and refuses the worker's
// request then, so that its outbox holds nothing it cannot send. The
// GM validates Body (ParseWorkerInfo) itself and refuses a bad one in its
// ReportAck rather than closing the connection: a report the GM can never apply
// must leave the outbox, not block it.
type Report struct {
	// ID is the report's sequence number in the LC's outbox, strictly
	// increasing per LC and never reused, starting at 1.
	ID uint64 `json:"id"`
	// Kind says what Body is: "" (ReportWorker) for a worker's WorkerInfo,
	// ReportDataset for a DatasetReport the LC itself makes.
	Kind ReportKind `json:"kind,omitempty"`
	// Worker is the {worker-name} of the worker API's URL.
	Worker string `json:"worker"`
	// Body is the worker's JSON body as received (a WorkerInfo), a JSON object.
	Body json.RawMessage `json:"body"`
	// ReceivedAt is when the LC received the report from the worker.
	ReceivedAt time.Time `json:"receivedAt"`
	// From is the address the worker called from, which the LC checked is
	// the worker pod's, in canonical form; "" for the LC's own reports and
	// those of an LC that predates it. The GM checks it again against the
	// pod's IPs.
	From string `json:"from,omitempty"`
}

// Type is TypeReport.
func (*Report) Type() Type { return TypeReport }

func (r *Report) validate() error {
	switch {
	case r.ID == 0:
		return errors.New("id is required (greater than 0)")
	case r.ID > math.MaxInt64:
		// Status records it as an int64 (lastReportID).
		return fmt.Errorf("id %d is more than %d", r.ID, int64(math.MaxInt64))
	case r.Worker == "":
		return errors.New("worker is required")
	case r.ReceivedAt.IsZero():
		return errors.New("receivedAt is required")
	case r.From != "" && !canonicalIP(r.From):
		return fmt.Errorf("from %q is not an IP address in canonical form", clip(r.From))
	}
	return checkObject("body", r.Body)
}

func (r *Report) normalize() { r.Body = compact(r.Body) }

// ReportAck tells the LC which reports it may remove from its outbox.
type ReportAck struct {
	// IDs are the reports applied or definitively refused, at least one.
	IDs []uint64 `json:"ids"`
	// Refused says why some of IDs were refused, so the LC can log it. Every
	// ID here is also in IDs: a refused report is acknowledged all the same,
	// since resending it would never succeed.
	Refused []RefusedReport `json:"refused,omitempty"`
}

// RefusedReport is a report the GM will never apply, and why.
type RefusedReport struct {
	ID     uint64 `json:"id"`
	Reason string `json:"reason"`
}

// Type is TypeReportAck.
func (*ReportAck) Type() Type { return TypeReportAck }

func (a *ReportAck) validate() error {
	if len(a.IDs) == 0 {
		return errors.New("ids is required (at least one)")
	}
	acked := make(map[uint64]bool, len(a.IDs))
	for i, id := range a.IDs {
		if id == 0 {
			return fmt.Errorf("ids[%d]: id must be greater than 0", i)
		}
		acked[id] = true
	}
	for i, r := range a.Refused {
		if !acked[r.ID] {
			return fmt.Errorf("refused[%d]: id %d is not in ids", i, r.ID)
		}
	}
	return nil
}

func (a *ReportAck) normalize() {
	if len(a.Refused) == 0 {
		a.Refused = nil
	}
}

// Heartbeat keeps the link observably alive; both ends send it periodically
// and treat a read deadline passing without any message as a dead link.
type Heartbeat struct {
	// Time is the sender's clock when it sent the heartbeat.
	Time time.Time `json:"time"`
	// Outbox is how full the LocalController's outbox is (a LocalController's
	// heartbeats carry it; the GlobalManager's do not), so that a filling
	// outbox shows on the node's link Lease before workers get 503.
	Outbox *OutboxFill `json:"outbox,omitempty"`
}

// OutboxFill is what a LocalController's outbox holds, and its bounds.
type OutboxFill struct {
	Reports    int   `json:"reports"`
	Bytes      int64 `json:"bytes"`
	MaxReports int   `json:"maxReports"`
	MaxBytes   int64 `json:"maxBytes"`
}

// Percent is how full the outbox is, by whichever bound is nearer, 0–100.
func (f OutboxFill) Percent() int {
	p := 0
	if f.MaxReports > 0 {
		p = f.Reports * 100 / f.MaxReports
	}
	if f.MaxBytes > 0 {
		p = max(p, int(f.Bytes*100/f.MaxBytes))
	}
	return min(max(p, 0), 100)
}

// Type is TypeHeartbeat.
func (*Heartbeat) Type() Type { return TypeHeartbeat }

func (h *Heartbeat) validate() error {
	if h.Time.IsZero() {
		return errors.New("time is required")
	}
	if o := h.Outbox; o != nil && (o.Reports < 0 || o.Bytes < 0 || o.MaxReports < 0 || o.MaxBytes < 0) {
		return errors.New("outbox: counts and bounds must not be negative")
	}
	return nil
}
