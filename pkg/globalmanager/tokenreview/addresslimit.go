package tokenreview

import (
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/boundedmap"
)

// Junk costs whoever sends it. A token a server refuses itself (Verify)
// costs a signature check, but every connection costs a TLS handshake, and
// a token the API server signed (an old one, a deleted Pod's) may still
// cost a TokenReview now and then. So a server counts by address the
// requests it refused for their token (401, 403); past perMinute within a
// minute the address is blocked for RefusalBlock. A blocked address's
// token is still read, but only a token the issuer's keys verify goes on
// (the edge hub's: one it verifies whole, as a LocalController's; the
// replicas APIs': one the API server signed, to its review); any other is
// refused at once, 429 with Retry-After, without a TokenReview. So junk
// sent from the address of real clients (a NAT, any process on their node)
// never locks them out, and since only refusals count, thousands of clients
// behind one address (a NAT, or the tests' and the bench's 127.0.0.1)
// connect as they would alone. An IPv6 client is counted by its /64, which
// one host usually has whole.

// RefusalBlock is how long an address past its refusals is refused.
const RefusalBlock = time.Minute

// maxLimitedAddresses bounds the addresses whose refusals are counted at
// once; one whose count is back to nothing is forgotten first.
const maxLimitedAddresses = 100_000

// AddressLimiter counts refusals by client address.
type AddressLimiter struct {
	perMinute int // 0 or less: no limit
	clock     clock.PassiveClock

	mu    sync.Mutex
	addrs map[string]*addressRefusals
}

// addressRefusals are an address's recent refusals.
type addressRefusals struct {
	refusals     *rate.Limiter // perMinute a minute, as many at once
	blockedUntil time.Time
}

// NewAddressLimiter counts refusals against perMinute a minute by clk; 0
// or less sets no limit.
func NewAddressLimiter(perMinute int, clk clock.PassiveClock) *AddressLimiter {
	return &AddressLimiter{perMinute: perMinute, clock: clk, addrs: make(map[string]*addressRefusals)}
}

// Blocked says whether requests from remoteAddr (host:port) are blocked
// now, and for how many more seconds.
func (l *AddressLimiter) Blocked(remoteAddr string) (after int, blocked bool) {
	if l.perMinute <= 0 {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.addrs[clientAddress(remoteAddr)]
	now := l.clock.Now()
	if r == nil || !now.Before(r.blockedUntil) {
		return 0, false
	}
	return max(1, int(math.Ceil(r.blockedUntil.Sub(now).Seconds()))), true
}

// Refused counts a request from remoteAddr refused for its token; past
// the limit, the address is blocked for RefusalBlock.
func (l *AddressLimiter) Refused(remoteAddr string) {
	if l.perMinute <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key, now := clientAddress(remoteAddr), l.clock.Now()
	r := l.addrs[key]
	if r == nil {
		boundedmap.MakeRoom(l.addrs, maxLimitedAddresses, func(r *addressRefusals) bool {
			return !now.Before(r.blockedUntil) && r.refusals.TokensAt(now) >= float64(l.perMinute)
		})
		r = &addressRefusals{refusals: rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), l.perMinute)}
		l.addrs[key] = r
	}
	// Its share spent, the address's next connection is refused.
	if !r.refusals.AllowN(now, 1) || r.refusals.TokensAt(now) < 1 {
		r.blockedUntil = now.Add(RefusalBlock)
	}
}

// clientAddress is the address remoteAddr's refusals are counted under: its
// IP, or for IPv6 its /64.
func clientAddress(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		prefix, _ := ip.Prefix(64)
		return prefix.String()
	}
	return ip.String()
}
