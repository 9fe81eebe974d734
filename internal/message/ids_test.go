package message

import (
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOffsetMsgID(t *testing.T) {
	tests := []struct {
		name string
		host string
		off  int64
		id   string
	}{
		{"spec-example", "127.0.0.1:20911", 170, "7F000001000051AF00000000000000AA"},
		{"send-response-02", "127.0.0.1:20911", 0, "7F000001000051AF0000000000000000"},
		{"send-response-03", "127.0.0.1:20911", 207, "7F000001000051AF00000000000000CF"},
		{"max", "255.255.255.255:65535", 1<<63 - 1, "FFFFFFFF0000FFFF7FFFFFFFFFFFFFFF"},
		{"ipv6", "[2001:db8::1]:10911", 0x123456789A, "20010DB800000000000000000000000100002A9F000000123456789A"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			host := netip.MustParseAddrPort(tc.host)
			require.Equal(t, tc.id, OffsetMsgID(host, tc.off))
			require.Equal(t, "x,"+tc.id, string(AppendOffsetMsgID([]byte("x,"), host, tc.off)))
			gotHost, gotOff, err := ParseOffsetMsgID(tc.id)
			require.NoError(t, err)
			require.Equal(t, host, gotHost)
			require.Equal(t, tc.off, gotOff)
			gotHost, gotOff, err = ParseOffsetMsgID(strings.ToLower(tc.id))
			require.NoError(t, err)
			require.Equal(t, host, gotHost)
			require.Equal(t, tc.off, gotOff)
		})
	}

	// An IPv4-mapped host is an IPv4 id, matching what Encode stores.
	mapped := netip.MustParseAddrPort("[::ffff:127.0.0.1]:20911")
	require.Equal(t, "7F000001000051AF00000000000000AA", OffsetMsgID(mapped, 170))

	// The batch send response (file 04) joins one id per member.
	var offs []int64
	for id := range strings.SplitSeq("7F000001000051AF00000000000001CF,7F000001000051AF0000000000000250,7F000001000051AF00000000000002D1", ",") {
		_, off, err := ParseOffsetMsgID(id)
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.Equal(t, []int64{463, 592, 721}, offs)
}

func TestParseOffsetMsgID_Errors(t *testing.T) {
	valid := "7F000001000051AF00000000000000AA"
	for name, id := range map[string]string{
		"empty":           "",
		"31":              valid[:31],
		"33":              valid + "0",
		"55":              strings.Repeat("0", 55),
		"57":              strings.Repeat("0", 57),
		"not-hex":         "7F000001000051AF00000000000000AG",
		"space":           " F000001000051AF00000000000000AA",
		"port-65536":      "7F0000010001000000000000000000AA",
		"port-negative":   "7F000001FFFFFFFF00000000000000AA",
		"offset-negative": "7F000001000051AF80000000000000AA",
		"utf8":            "7F000001000051AF00000000000000é",
	} {
		_, _, err := ParseOffsetMsgID(id)
		require.ErrorIs(t, err, ErrInvalidMsgID, name)
	}
}

var uniqIDPattern = regexp.MustCompile(`^[0-9A-F]{32}$`)

func TestUniqIDGenerator_Format(t *testing.T) {
	g := NewUniqIDGenerator(netip.MustParseAddr("192.0.2.2"), 29356)
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	g.now = func() time.Time { return clock }

	// 192.0.2.2 | pid 29356 | class-loader 0 | 2462400000 ms into November | counter
	require.Equal(t, "C000020272AC0000000092C53E000000", g.Next())
	require.Equal(t, "C000020272AC0000000092C53E000001", g.Next())
	clock = clock.Add(time.Millisecond)
	id := g.Next()
	require.Equal(t, "C000020272AC0000000092C53E010000", id)

	p, err := ParseUniqID(id)
	require.NoError(t, err)
	require.Equal(t, UniqID{
		IP:          netip.MustParseAddr("192.0.2.2"),
		PID:         29356,
		MonthMillis: 2462400001,
	}, p)

	// The clock stepping back does not repeat ids.
	clock = clock.Add(-time.Second)
	require.Equal(t, "C000020272AC0000000092C53E010001", g.Next())

	// A new month restarts the ms part.
	clock = time.Date(2026, 12, 1, 0, 0, 0, 7, time.UTC)
	require.Equal(t, "C000020272AC00000000000000000000", g.Next())
}

func TestUniqIDGenerator_CounterOverflow(t *testing.T) {
	g := NewUniqIDGenerator(netip.MustParseAddr("10.0.0.1"), 1)
	clock := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	g.now = func() time.Time { return clock }
	seen := make(map[string]bool, 1<<16+2)
	for range 1<<16 + 2 {
		id := g.Next()
		require.False(t, seen[id], id)
		seen[id] = true
	}
	// The 65537th id moved the ms part ahead of the frozen clock.
	p, err := ParseUniqID(g.Next())
	require.NoError(t, err)
	require.Equal(t, uint32(1001), p.MonthMillis)
	require.Equal(t, uint16(2), p.Counter)
}

func TestUniqIDGenerator_Concurrent(t *testing.T) {
	g := NewUniqIDGenerator(netip.MustParseAddr("10.0.0.1"), 70000) // pid truncated to 16 bits
	const workers, each = 4, 5000
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				ids[w] = append(ids[w], g.Next())
			}
		})
	}
	wg.Wait()
	seen := make(map[string]bool, workers*each)
	for _, list := range ids {
		for _, id := range list {
			require.Regexp(t, uniqIDPattern, id)
			require.False(t, seen[id], "duplicate %s", id)
			seen[id] = true
		}
	}
	p, err := ParseUniqID(ids[0][0])
	require.NoError(t, err)
	require.Equal(t, uint16(70000&0xFFFF), p.PID)
}

func TestNewUniqIDGenerator_Addresses(t *testing.T) {
	for addr, prefix := range map[string]string{
		"192.0.2.2":          "C0000202",
		"::ffff:192.0.2.2":   "C0000202",
		"2001:db8::a0b:c0d":  "0A0B0C0D",
		"":                   "00000000",
		"fe80::1:2:304%eth0": "00020304",
	} {
		var ip netip.Addr
		if addr != "" {
			ip = netip.MustParseAddr(addr)
		}
		id := NewUniqIDGenerator(ip, 1).Next()
		require.Equal(t, prefix+"0001", id[:12], addr)
	}
}

func TestParseUniqID(t *testing.T) {
	// A Go client id (file 02): last six bytes in lowercase, second-resolution time.
	p, err := ParseUniqID("C000020272AC00000000952411a80001")
	require.NoError(t, err)
	require.Equal(t, UniqID{
		IP:          netip.MustParseAddr("192.0.2.2"),
		PID:         29356,
		MonthMillis: 0x952411A8,
		Counter:     1,
	}, p)
	require.Zero(t, p.MonthMillis%1000)

	for _, bad := range []string{"", "C000020272AC00000000952411a8000", "C000020272AC00000000952411a800011", "C000020272AC00000000952411a8000z"} {
		_, err := ParseUniqID(bad)
		require.ErrorIs(t, err, ErrInvalidMsgID, bad)
	}
}
