package acl

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

var localhost = netip.MustParseAddr("127.0.0.1")

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		match   []string
		noMatch []string
	}{
		{"*", []string{"1.2.3.4", "::1"}, nil},
		{"*.*.*.*", []string{"1.2.3.4"}, nil},
		{"", nil, []string{"1.2.3.4", "127.0.0.1"}},
		{"192.168.1.7", []string{"192.168.1.7", "::ffff:192.168.1.7"}, []string{"192.168.1.8"}},
		{"::1", []string{"::1"}, []string{"127.0.0.1"}},
		{"192.168.*.*", []string{"192.168.0.0", "192.168.255.3"}, []string{"192.169.0.1", "::1"}},
		{"10.1.1.1-100", []string{"10.1.1.1", "10.1.1.100", "10.1.1.50"}, []string{"10.1.1.0", "10.1.1.101", "10.1.2.50"}},
		{"10.1.1.1,10.1.1.9, 10.1.1.4", []string{"10.1.1.1", "10.1.1.4", "10.1.1.9"}, []string{"10.1.1.2"}},
		{"192.168.1.{1,2}", []string{"192.168.1.1", "192.168.1.2"}, []string{"192.168.1.3", "192.168.2.1"}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			p, err := ParsePattern(tc.pattern)
			require.NoError(t, err)
			for _, a := range tc.match {
				require.True(t, p.Match(netip.MustParseAddr(a)), a)
			}
			for _, a := range tc.noMatch {
				require.False(t, p.Match(netip.MustParseAddr(a)), a)
			}
		})
	}
}

func TestParsePattern_Errors(t *testing.T) {
	for _, s := range []string{"host.example", "1.2.3", "1.2.3.256", "1.2.3.9-4", "1.2.3.-4", "1.2.3.{1,2", "1.2.3{1}",
		"1.2.3.{1,x}", "1.2.*", "a,b", "1.2.3.4-", "1.2.3.+4"} {
		_, err := ParsePattern(s)
		require.Error(t, err, s)
		require.Contains(t, err.Error(), "address pattern")
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"*", "192.168.*.*", "10.1.1.1-100", "1.1.1.1,2.2.2.2", "192.168.1.{1,2}", "::1", ""} {
		f.Add(s, []byte{192, 168, 1, 2})
	}
	f.Fuzz(func(t *testing.T, s string, ip []byte) {
		p, err := ParsePattern(s)
		if err != nil {
			if p.Set() {
				t.Fatalf("%q: an error and a pattern", s)
			}
			return
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			_ = p.Match(a)
			if p.all && a.IsValid() && !p.Match(a) {
				t.Fatalf("%q does not match %s", s, a)
			}
		}
	})
}
