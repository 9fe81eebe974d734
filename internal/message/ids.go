package message

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// Offset message id lengths in hex characters (spec §6.7).
const (
	OffsetMsgIDLenV4 = 2 * (LenHostV4 + LenInt64) // 32
	OffsetMsgIDLenV6 = 2 * (LenHostV6 + LenInt64) // 56
	UniqIDLen        = 2 * uniqIDBytes            // 32
	uniqIDBytes      = 16
)

const upperHex = "0123456789ABCDEF"

// AppendOffsetMsgID appends the offset message id of the record at physOffset
// stored by storeHost: uppercase hex of the store IP (4 or 16 bytes, with
// IPv4-mapped addresses as IPv4, as Encode stores them), the port as an int32
// and physOffset as an int64. An invalid address is written as 0.0.0.0.
func AppendOffsetMsgID(dst []byte, storeHost netip.AddrPort, physOffset int64) []byte {
	var buf [LenHostV6 + LenInt64]byte
	a := storeHost.Addr().Unmap()
	n := LenHostV4
	if a.Is6() {
		n = LenHostV6
	}
	putHost(buf[:n], storeHost)
	putI64(buf[:], n, physOffset)
	for _, c := range buf[:n+LenInt64] {
		dst = append(dst, upperHex[c>>4], upperHex[c&0xF])
	}
	return dst
}

// OffsetMsgID returns the offset message id (32 hex characters for an IPv4
// store host, 56 for IPv6), e.g. 7F000001000051AF00000000000000AA for
// 127.0.0.1:20911 at offset 170.
func OffsetMsgID(storeHost netip.AddrPort, physOffset int64) string {
	var buf [OffsetMsgIDLenV6]byte
	return string(AppendOffsetMsgID(buf[:0], storeHost, physOffset))
}

// ParseOffsetMsgID decodes an offset message id, in either hex case, into the
// store host and physical offset. It accepts exactly 32 (IPv4) or 56 (IPv6)
// characters, a port in 0..65535 and a non-negative offset; errors wrap
// ErrInvalidMsgID.
func ParseOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	var hostLen int
	switch len(id) {
	case OffsetMsgIDLenV4:
		hostLen = LenHostV4
	case OffsetMsgIDLenV6:
		hostLen = LenHostV6
	default:
		return netip.AddrPort{}, 0, fmt.Errorf("%w: offset id %q has %d characters, want %d or %d",
			ErrInvalidMsgID, id, len(id), OffsetMsgIDLenV4, OffsetMsgIDLenV6)
	}
	var buf [LenHostV6 + LenInt64]byte
	b := buf[:len(id)/2]
	if !decodeHex(b, id) {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: offset id %q is not hex", ErrInvalidMsgID, id)
	}
	host, ok := readHost(b[:hostLen])
	if !ok {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: offset id %q has port %d outside 0..65535",
			ErrInvalidMsgID, id, getI32(b, hostLen-LenInt32))
	}
	off := getI64(b, hostLen)
	if off < 0 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: offset id %q has negative offset %d", ErrInvalidMsgID, id, off)
	}
	return host, off, nil
}

// decodeHex decodes len(dst)*2 hex characters of either case.
func decodeHex(dst []byte, s string) bool {
	for i := range dst {
		hi, ok1 := fromHex(s[2*i])
		lo, ok2 := fromHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// UniqIDGenerator makes UNIQ_KEY values (spec §6.7): 16 bytes printed as 32
// uppercase hex characters (Java's form; the Go client lowercases the last
// six bytes):
//
//	client IPv4 (4) | pid (int16) | class-loader hash (int32, 0) |
//	ms since the start of the month, UTC (int32) | counter (int16)
//
// It is safe for concurrent use. Within one generator the (ms, counter) pair
// strictly increases: the counter restarts at 0 each millisecond, and when
// it runs out, or the clock steps back, the ms part runs ahead of the clock.
// So ids never repeat within a month; across a month boundary the format
// itself can repeat (as in Java).
type UniqIDGenerator struct {
	prefix [10]byte         // IP, pid, class-loader hash
	now    func() time.Time // replaced in tests

	mu sync.Mutex
	// Guarded by mu.
	last       int64  // unix ms of the last id, may run ahead of the clock
	seq        uint16 // counter of the last id
	monthStart int64  // unix ms of the start of last's month
	monthEnd   int64  // unix ms of the start of the next month
}

// NewUniqIDGenerator returns a generator for a client at ip with process id
// pid. The id holds 4 address bytes: an IPv4 (or IPv4-mapped) address as is,
// an IPv6 address by its last 4 bytes, an invalid one as 0.0.0.0. The pid is
// truncated to 16 bits, as Java does.
func NewUniqIDGenerator(ip netip.Addr, pid int) *UniqIDGenerator {
	// NB: the wall clock advanced by the monotonic one, read alone: half
	// the cost of time.Now, and the id's time is only informative (the
	// sequence makes it unique).
	base := time.Now()
	g := &UniqIDGenerator{now: func() time.Time { return base.Add(time.Since(base)) }}
	ip = ip.Unmap()
	switch {
	case ip.Is4():
		a := ip.As4()
		copy(g.prefix[:4], a[:])
	case ip.Is6():
		a := ip.As16()
		copy(g.prefix[:4], a[12:])
	}
	binary.BigEndian.PutUint16(g.prefix[4:], uint16(pid))
	// prefix[6:10] is the class-loader hash, always 0 outside Java.
	return g
}

// Next returns a new UNIQ_KEY.
func (g *UniqIDGenerator) Next() string {
	b := g.NextBytes()
	return string(b[:])
}

// NextBytes is Next without a string: a caller that writes the id into
// something larger saves the string's allocation.
func (g *UniqIDGenerator) NextBytes() [UniqIDLen]byte {
	now := g.now().UnixMilli()
	g.mu.Lock()
	switch {
	case now > g.last:
		g.last, g.seq = now, 0
	case g.seq == 0xFFFF:
		g.last, g.seq = g.last+1, 0
	default:
		g.seq++
	}
	if g.last < g.monthStart || g.last >= g.monthEnd {
		t := time.UnixMilli(g.last).UTC()
		start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		g.monthStart, g.monthEnd = start.UnixMilli(), start.AddDate(0, 1, 0).UnixMilli()
	}
	rel, seq := uint32(g.last-g.monthStart), g.seq
	g.mu.Unlock()

	var b [uniqIDBytes]byte
	copy(b[:], g.prefix[:])
	binary.BigEndian.PutUint32(b[10:], rel)
	binary.BigEndian.PutUint16(b[14:], seq)
	var out [UniqIDLen]byte
	for i, c := range b {
		out[2*i], out[2*i+1] = upperHex[c>>4], upperHex[c&0xF]
	}
	return out
}

// UniqID is a decoded UNIQ_KEY.
type UniqID struct {
	IP              netip.Addr
	PID             uint16
	ClassLoaderHash int32
	// MonthMillis is the ms elapsed since the start of the month the id was
	// made in; which month is not recorded. Java stores it as an int, so
	// values past 2^31 are late-month times, not negative ones.
	MonthMillis uint32
	Counter     uint16
}

// ParseUniqID decodes a 32-character UNIQ_KEY in either hex case (the Go
// client mixes them). Errors wrap ErrInvalidMsgID.
func ParseUniqID(id string) (UniqID, error) {
	if len(id) != UniqIDLen {
		return UniqID{}, fmt.Errorf("%w: unique id %q has %d characters, want %d", ErrInvalidMsgID, id, len(id), UniqIDLen)
	}
	var b [uniqIDBytes]byte
	if !decodeHex(b[:], id) {
		return UniqID{}, fmt.Errorf("%w: unique id %q is not hex", ErrInvalidMsgID, id)
	}
	return UniqID{
		IP:              netip.AddrFrom4([4]byte(b[:4])),
		PID:             binary.BigEndian.Uint16(b[4:]),
		ClassLoaderHash: int32(binary.BigEndian.Uint32(b[6:])),
		MonthMillis:     binary.BigEndian.Uint32(b[10:]),
		Counter:         binary.BigEndian.Uint16(b[14:]),
	}, nil
}
