package message

import (
	"unicode/utf16"
	"unicode/utf8"
)

// javaHash continues Java's String.hashCode, h = 31*h + c over the UTF-16
// code units of s (UTF-8 decoded), in int32 arithmetic.
//
// NB: invalid UTF-8 is hashed as one U+FFFD per bad byte (Go's decoding).
// Java's decoder may group a bad sequence into a single U+FFFD, so such
// strings can hash differently; producers send valid UTF-8.
func javaHash[S text](h int32, s S) int32 {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		// NB: the conversion copies at most 4 bytes into a stack buffer, or
		// is free for strings, so hashing does not allocate.
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		i += n
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			h = 31*(31*h+r1) + r2
		} else {
			h = 31*h + r
		}
	}
	return h
}

// TagsHashCode returns the consume-queue tagsCode of a TAGS value: Java's
// String.hashCode, sign-extended to int64, and 0 for "" (spec §7.3).
func TagsHashCode(tag string) int64 {
	return int64(javaHash(0, tag))
}

// KeyHash returns the key index hash of key (spec §7.4): the absolute value
// of Java's String.hashCode, with math.MinInt32 mapped to 0. The indexed key
// is topic + "#" + key; IndexKeyHash computes that without building it.
func KeyHash(key string) int32 {
	return absHash(javaHash(0, key))
}

// IndexKeyHash returns KeyHash(topic + "#" + key) without allocating.
func IndexKeyHash(topic, key []byte) int32 {
	h := javaHash(0, topic)
	h = 31*h + '#'
	return absHash(javaHash(h, key))
}

func absHash(h int32) int32 {
	if h < 0 {
		h = -h // -MinInt32 wraps to MinInt32, as Math.abs does
	}
	if h < 0 {
		return 0
	}
	return h
}
