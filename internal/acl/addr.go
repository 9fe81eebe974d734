package acl

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Pattern matches remote IP addresses. The forms are RocketMQ's:
//
//   - or  *.*.*.*        every address
//     192.168.1.7           one address (IPv6 too)
//     192.168.*.*           a * octet matches any value
//     10.1.1.1-100          a lo-hi octet matches lo..hi
//     10.1.1.1,10.1.1.2     any of a list of addresses
//     192.168.1.{1,2}       any of a list of last octets after a prefix
//
// The zero Pattern (from a blank string) matches nothing.
type Pattern struct {
	all   bool
	addrs []netip.Addr // exact addresses (the single and list forms)
	// octets is the IPv4 range form: per octet, the inclusive bounds.
	octets *[4][2]uint8
}

// maxPatternList bounds the entries of a list pattern.
const maxPatternList = 1024

// ParsePattern compiles an address pattern.
func ParsePattern(s string) (Pattern, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Pattern{}, nil
	case s == "*" || s == "*.*.*.*":
		return Pattern{all: true}, nil
	case strings.Contains(s, "{"):
		return parseBraces(s)
	case strings.Contains(s, ","):
		return parseList(strings.Split(s, ","), s)
	case strings.ContainsAny(s, "*-"):
		return parseRange(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return Pattern{}, fmt.Errorf("address pattern %q: not an IP address, *, a.b.*.*, a.b.c.lo-hi, a,b,c or a.b.c.{x,y}", s)
	}
	return Pattern{addrs: []netip.Addr{a.Unmap()}}, nil
}

func parseList(items []string, s string) (Pattern, error) {
	if len(items) > maxPatternList {
		return Pattern{}, fmt.Errorf("address pattern %q: %d addresses, at most %d", s, len(items), maxPatternList)
	}
	p := Pattern{addrs: make([]netip.Addr, 0, len(items))}
	for _, it := range items {
		a, err := netip.ParseAddr(strings.TrimSpace(it))
		if err != nil {
			return Pattern{}, fmt.Errorf("address pattern %q: %q is not an IP address", s, strings.TrimSpace(it))
		}
		p.addrs = append(p.addrs, a.Unmap())
	}
	return p, nil
}

// parseBraces reads prefix{x,y,...}: the prefix ends with a dot, the braces
// close the pattern.
func parseBraces(s string) (Pattern, error) {
	open := strings.IndexByte(s, '{')
	if !strings.HasSuffix(s, "}") || strings.Count(s, "{") != 1 || strings.Count(s, "}") != 1 {
		return Pattern{}, fmt.Errorf("address pattern %q: braces must close the pattern, as in 192.168.1.{1,2}", s)
	}
	prefix := s[:open]
	if !strings.HasSuffix(prefix, ".") {
		return Pattern{}, fmt.Errorf("address pattern %q: want a prefix ending in a dot before {", s)
	}
	items := strings.Split(s[open+1:len(s)-1], ",")
	for i, it := range items {
		items[i] = prefix + strings.TrimSpace(it)
	}
	return parseList(items, s)
}

// parseRange reads the four-octet form with * and lo-hi octets.
func parseRange(s string) (Pattern, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return Pattern{}, fmt.Errorf("address pattern %q: want four octets, as in 192.168.*.* or 10.1.1.1-100", s)
	}
	var oct [4][2]uint8
	for i, part := range parts {
		lo, hi, err := parseOctet(part)
		if err != nil {
			return Pattern{}, fmt.Errorf("address pattern %q: octet %d: %v", s, i+1, err)
		}
		oct[i] = [2]uint8{lo, hi}
	}
	return Pattern{octets: &oct}, nil
}

func parseOctet(s string) (lo, hi uint8, err error) {
	if s == "*" {
		return 0, 255, nil
	}
	a, b, isRange := strings.Cut(s, "-")
	lo, err = octet(a)
	if err != nil || !isRange {
		return lo, lo, err
	}
	if hi, err = octet(b); err != nil {
		return 0, 0, err
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("range %q runs backwards", s)
	}
	return lo, hi, nil
}

func octet(s string) (uint8, error) {
	if s == "" || len(s) > 3 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number 0-255", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 255 {
		return 0, fmt.Errorf("%q is not a number 0-255", s)
	}
	return uint8(n), nil
}

// Set reports whether the pattern was given (a blank one was not).
func (p Pattern) Set() bool { return p.all || p.addrs != nil || p.octets != nil }

// Match reports whether ip matches the pattern.
func (p Pattern) Match(ip netip.Addr) bool {
	ip = ip.Unmap()
	switch {
	case p.all:
		return ip.IsValid()
	case p.octets != nil:
		if !ip.Is4() {
			return false
		}
		b := ip.As4()
		for i, r := range p.octets {
			if b[i] < r[0] || b[i] > r[1] {
				return false
			}
		}
		return true
	}
	for _, a := range p.addrs {
		if a == ip {
			return true
		}
	}
	return false
}
