package message

import "slices"

// tagSetMapFrom is the size from which a TagCodeSet answers with a map: a
// list of a few codes is searched faster than a map is hashed.
const tagSetMapFrom = 16

// TagCodeSet is a subscription's set of tags hash codes. Each message a
// pull scans is looked up in it, so a long set (a subscription may name
// thousands of tags) is a map. A nil *TagCodeSet takes every message.
type TagCodeSet struct {
	list []int64
	set  map[int64]struct{}
}

// NewTagCodeSet returns the set of codes (nil for none).
func NewTagCodeSet(codes []int64) *TagCodeSet {
	if len(codes) == 0 {
		return nil
	}
	s := &TagCodeSet{list: codes}
	if len(codes) >= tagSetMapFrom {
		s.set = make(map[int64]struct{}, len(codes))
		for _, c := range codes {
			s.set[c] = struct{}{}
		}
	}
	return s
}

// Has reports whether code is in s; a nil s has every code.
func (s *TagCodeSet) Has(code int64) bool {
	switch {
	case s == nil:
		return true
	case s.set != nil:
		_, ok := s.set[code]
		return ok
	}
	return slices.Contains(s.list, code)
}

// Codes returns the codes in the order given (nil for a nil s).
func (s *TagCodeSet) Codes() []int64 {
	if s == nil {
		return nil
	}
	return s.list
}
