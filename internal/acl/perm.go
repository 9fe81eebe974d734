package acl

import (
	"fmt"
	"strings"
)

// Perm is a permission set, with RocketMQ's bits.
type Perm uint8

// Permission bits (RocketMQ's Permission class).
const (
	Deny Perm = 1
	Any  Perm = 2 // PUB or SUB; what a request needing either asks for
	Pub  Perm = 4
	Sub  Perm = 8
)

// String returns the permission in the rules file's spelling.
func (p Perm) String() string {
	switch {
	case p&Deny != 0:
		return "DENY"
	case p&(Pub|Sub) == Pub|Sub:
		return "PUB|SUB"
	case p&Pub != 0:
		return "PUB"
	case p&Sub != 0:
		return "SUB"
	case p&Any != 0:
		return "PUB or SUB"
	}
	return "none"
}

// ParsePerm reads DENY, PUB, SUB, PUB|SUB or SUB|PUB (spaces around | are
// allowed, case is not folded: RocketMQ's spelling). Java reads anything
// else as DENY; Sluice refuses the file instead, so a typo is not a silent
// lock-out.
func ParsePerm(s string) (Perm, error) {
	switch strings.ReplaceAll(strings.TrimSpace(s), " ", "") {
	case "DENY":
		return Deny, nil
	case "PUB":
		return Pub, nil
	case "SUB":
		return Sub, nil
	case "PUB|SUB", "SUB|PUB":
		return Pub | Sub, nil
	}
	return 0, fmt.Errorf("permission %q: want DENY, PUB, SUB or PUB|SUB", s)
}

// allows reports whether owned grants needed (RocketMQ's
// Permission.checkPermission): any DENY bit denies; a need for Any is met
// by PUB or SUB.
func (owned Perm) allows(needed Perm) bool {
	if owned&Deny != 0 {
		return false
	}
	if needed&Any != 0 {
		return owned&(Pub|Sub) != 0
	}
	return needed&owned != 0
}
