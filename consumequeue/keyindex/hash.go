package keyindex

import (
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

// Key returns the indexed key for a message key of a topic: topic + "#" +
// key, as RocketMQ builds it (spec §7.4). Put and Query take keys built by
// Key; the caller indexes each UNIQ_KEY and each space-separated KEYS token.
func Key(topic, key string) string { return topic + "#" + key }

// keyHash is abs(Java String.hashCode(key)), with math.MinInt32 mapped to 0.
// Java hashes UTF-16 code units; ASCII bytes hash the same either way.
func keyHash(key string) int32 { return finish(hashOn(0, key)) }

// KeyHash is keyHash(Key(topic, key)) without building the string (the
// dispatcher's path: one per stored message).
func KeyHash(topic, key []byte) int32 {
	h := hashOn(0, topic)
	h = 31*h + '#'
	return finish(hashOn(h, key))
}

// finish is abs(h), with math.MinInt32 mapped to 0.
func finish(h int32) int32 {
	switch {
	case h == math.MinInt32:
		return 0
	case h < 0:
		return -h
	}
	return h
}

// hashOn continues Java's String.hashCode h over the code units of s.
func hashOn[S string | []byte](h int32, s S) int32 {
	i := 0
	// NB: four ASCII bytes a step (31⁴, 31³, 31², 31): the same sum with a
	// shorter chain of dependent multiplications.
	for ; i+4 <= len(s); i += 4 {
		c0, c1, c2, c3 := s[i], s[i+1], s[i+2], s[i+3]
		if c0|c1|c2|c3 >= utf8.RuneSelf {
			break
		}
		h = h*923521 + int32(c0)*29791 + int32(c1)*961 + int32(c2)*31 + int32(c3)
	}
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		var r rune
		var size int
		switch v := any(s).(type) {
		case string:
			r, size = utf8.DecodeRuneInString(v[i:])
		case []byte:
			r, size = utf8.DecodeRune(v[i:])
		}
		i += size
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError || r2 != utf8.RuneError {
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
		} else {
			h = 31*h + int32(r)
		}
	}
	return h
}
