package message

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
)

// A properties string is name\x01value pairs separated by \x02 (spec §6.4).
// Java writes no trailing \x02; the Go client writes one after every pair.
// Every reader here follows the same tolerant rules:
//
//   - the string is cut at every \x02 into pieces; empty pieces are skipped;
//   - a piece is a pair only if its first \x01 is neither its first nor its
//     last byte (Java's rule); other pieces are ignored;
//   - the name is before the first \x01, the value is everything after it
//     (it may contain \x01);
//   - names are case-sensitive and the last pair with a name wins.

// text is the set of types properties are read from: strings in messages,
// byte views in stored records.
type text interface{ ~string | ~[]byte }

// nextProperty returns the first pair of p in the piece starting at i or
// later, and the index of the piece after it. ok is false when there is none.
func nextProperty[S text](p S, i int) (name, value S, next int, ok bool) {
	for i < len(p) {
		j := i
		for j < len(p) && p[j] != PropertySeparator {
			j++
		}
		piece := p[i:j]
		i = j + 1
		k := 0
		for k < len(piece) && piece[k] != NameValueSeparator {
			k++
		}
		if k > 0 && k < len(piece)-1 {
			return piece[:k], piece[k+1:], i, true
		}
	}
	return name, value, len(p), false
}

// nextPropertyString is nextProperty for a string, with strings.IndexByte
// (vectorized) in place of the byte loops.
func nextPropertyString(p string, i int) (name, value string, next int, ok bool) {
	for i < len(p) {
		j := strings.IndexByte(p[i:], PropertySeparator)
		if j < 0 {
			j = len(p) - i
		}
		piece := p[i : i+j]
		i += j + 1
		if k := strings.IndexByte(piece, NameValueSeparator); k > 0 && k < len(piece)-1 {
			return piece[:k], piece[k+1:], i, true
		}
	}
	return "", "", len(p), false
}

// equal compares a string or byte view with a string without allocating.
func equal[S text](a S, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func propertyValue[S text](props S, name string) (value S, found bool) {
	for i := 0; i < len(props); {
		n, v, next, ok := nextProperty(props, i)
		if !ok {
			break
		}
		if equal(n, name) {
			value, found = v, true
		}
		i = next
	}
	return value, found
}

// PropertyValue returns the value of property name in props. It scans props
// without allocating; the value is a substring of props.
func PropertyValue(props, name string) (string, bool) {
	return propertyValue(props, name)
}

// PropertyValueBytes is PropertyValue for a byte view such as
// Record.Properties. The value aliases props.
func PropertyValueBytes(props []byte, name string) ([]byte, bool) {
	return propertyValue(props, name)
}

// PropertiesSeq yields the pairs of props in order, duplicates included.
func PropertiesSeq(props string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i := 0; i < len(props); {
			n, v, next, ok := nextProperty(props, i)
			if !ok || !yield(n, v) {
				return
			}
			i = next
		}
	}
}

// ParseProperties parses props into a map (never nil); the last pair with a
// name wins.
func ParseProperties(props string) map[string]string {
	m := make(map[string]string, strings.Count(props, string(rune(PropertySeparator)))+1)
	for n, v := range PropertiesSeq(props) {
		m[n] = v
	}
	return m
}

// validPair reports whether name and value survive a write and a parse: a
// non-empty name without \x01 or \x02, a non-empty value without \x02.
func validPair(name, value string) bool {
	return name != "" && value != "" &&
		strings.IndexByte(name, NameValueSeparator) < 0 &&
		strings.IndexByte(name, PropertySeparator) < 0 &&
		strings.IndexByte(value, PropertySeparator) < 0
}

// AppendProperties appends m as a properties string to dst, sorted by name
// for determinism, Java style (no trailing separator). Pairs that cannot be
// represented (see SetProperty) are skipped: a parser would drop or
// misread them.
func AppendProperties(dst []byte, m map[string]string) []byte {
	first := true
	for _, name := range slices.Sorted(maps.Keys(m)) {
		value := m[name]
		if !validPair(name, value) {
			continue
		}
		if !first {
			dst = append(dst, PropertySeparator)
		}
		first = false
		dst = append(dst, name...)
		dst = append(dst, NameValueSeparator)
		dst = append(dst, value...)
	}
	return dst
}

// DeleteProperty returns props without the pairs named name. If there are
// none, props is returned unchanged (no allocation); otherwise the result is
// rebuilt from the remaining pairs in their order, Java style, and pieces
// that are not pairs are dropped. The broker uses it to strip WAIT.
func DeleteProperty(props, name string) string {
	if _, ok := PropertyValue(props, name); !ok {
		return props
	}
	var b strings.Builder
	b.Grow(len(props))
	for n, v := range PropertiesSeq(props) {
		if n != name {
			writePair(&b, n, v)
		}
	}
	return b.String()
}

// writePair appends name\x01value to b, after a separator unless b is empty.
func writePair(b *strings.Builder, name, value string) {
	if b.Len() > 0 {
		b.WriteByte(PropertySeparator)
	}
	b.WriteString(name)
	b.WriteByte(NameValueSeparator)
	b.WriteString(value)
}

// SetProperty returns props with name set to value: earlier pairs named
// name are removed (see DeleteProperty) and the pair is appended. The name
// must be non-empty without \x01 or \x02 and the value non-empty without
// \x02; otherwise the error wraps ErrInvalidProperty. The result may exceed
// MaxPropertiesLen; CheckLimits catches that.
func SetProperty(props, name, value string) (string, error) {
	if !validPair(name, value) {
		return props, fmt.Errorf("%w: %q=%q (name and value must be non-empty, without \\x02, and the name without \\x01)",
			ErrInvalidProperty, name, value)
	}
	props = DeleteProperty(props, name)
	var b strings.Builder
	b.Grow(len(props) + 2 + len(name) + len(value))
	b.WriteString(props)
	if props != "" && props[len(props)-1] != PropertySeparator {
		b.WriteByte(PropertySeparator)
	}
	b.WriteString(name)
	b.WriteByte(NameValueSeparator)
	b.WriteString(value)
	return b.String(), nil
}

// SendProperties are the properties a broker acts on when it stores a sent
// message, as PropertyValue reads them (the last pair of a name wins).
type SendProperties struct {
	Wait, TranMsg, Delay, TimerDeliverMS string
	ReplyToClient                        string // a request-reply request's requester
	HasWait, HasDelay, HasTimerDeliverMS bool

	// What StoreProperties needs to cut instead of rewriting: the
	// properties read (src), whether every piece was a pair (plain) and
	// none named CLUSTER, and where the one WAIT pair is, separator
	// included (waitAt == waitEnd: none).
	src             string
	plain           bool
	waits           int
	waitAt, waitEnd int
}

// ReadSendProperties reads SendProperties from props in one scan, where
// PropertyValue would take one per name.
func ReadSendProperties(props string) SendProperties {
	sp := SendProperties{src: props, plain: true}
	for i := 0; i < len(props); {
		n, v, next, ok := nextPropertyString(props, i)
		if !ok {
			sp.plain = false // NB: pieces that are not pairs from i on
			break
		}
		if next-i != len(n)+len(v)+2 {
			sp.plain = false // NB: the pair is not the piece at i: pieces were skipped
		}
		switch n {
		case PropWait:
			sp.waits++
			sp.waitAt, sp.waitEnd = i, min(next, len(props))
			sp.Wait, sp.HasWait = v, true
		case PropCluster:
			sp.plain = false
		case PropTranMsg:
			sp.TranMsg = v
		case PropDelay:
			sp.Delay, sp.HasDelay = v, true
		case PropTimerDeliverMS:
			sp.TimerDeliverMS, sp.HasTimerDeliverMS = v, true
		case PropReplyToClient:
			sp.ReplyToClient = v
		}
		i = next
	}
	return sp
}

// StoreProperties returns props as a broker stores a sent message's: the
// pairs without WAIT, then CLUSTER set to cluster (unless cluster is not a
// valid value), built in one scan and one allocation. Its pairs are those of
// SetProperty(DeleteProperty(props, PropWait), PropCluster, cluster); pieces
// that are not pairs are dropped.
func StoreProperties(props, cluster string) string {
	set := validPair(PropCluster, cluster)
	var b strings.Builder
	b.Grow(len(props) + 2 + len(PropCluster) + len(cluster))
	for i := 0; i < len(props); {
		n, v, next, ok := nextPropertyString(props, i)
		if !ok {
			break
		}
		i = next
		if n != PropWait && (!set || n != PropCluster) {
			writePair(&b, n, v)
		}
	}
	if set {
		writePair(&b, PropCluster, cluster)
	}
	return b.String()
}

// StoreProperties is StoreProperties(props, cluster). For the properties
// sp was read from, when they are plain pairs with at most one WAIT and no
// CLUSTER (a client's usual send), it builds them with one concatenation
// instead of rewriting them pair by pair.
func (sp *SendProperties) StoreProperties(props, cluster string) string {
	if props != sp.src || !sp.plain || sp.waits > 1 || !validPair(PropCluster, cluster) {
		return StoreProperties(props, cluster)
	}
	// NB: the pairs are props but WAIT's; StoreProperties writes them
	// \x02-separated without a trailing one, then \x02CLUSTER\x01cluster.
	head, tail := props[:sp.waitAt], props[sp.waitEnd:]
	if tail == "" {
		head = strings.TrimSuffix(head, string(PropertySeparator))
	} else {
		tail = strings.TrimSuffix(tail, string(PropertySeparator))
	}
	if head == "" && tail == "" {
		return PropCluster + string(NameValueSeparator) + cluster
	}
	return head + tail + string(PropertySeparator) + PropCluster + string(NameValueSeparator) + cluster
}

// KeySeparator separates the keys inside a KEYS value.
const KeySeparator = ' '

// KeysSeq yields the keys of a KEYS value (DispatchInfo.Keys) as the key
// index sees them: split at single spaces, empty keys skipped (Java's rule;
// tabs and other white space are part of a key). The keys alias keys.
func KeysSeq(keys []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for k := range bytes.SplitSeq(keys, []byte{KeySeparator}) {
			if len(k) > 0 && !yield(k) {
				return
			}
		}
	}
}
