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
func keyHash(key string) int32 {
	var h int32
	for i := 0; i < len(key); {
		if c := key[i]; c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(key[i:])
		i += size
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError || r2 != utf8.RuneError {
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
		} else {
			h = 31*h + int32(r)
		}
	}
	switch {
	case h == math.MinInt32:
		return 0
	case h < 0:
		return -h
	}
	return h
}
