package protocol

import (
	"errors"
	"slices"
	"strconv"
)

// Sentinel errors wrapped by *FieldError. Callers test them with errors.Is.
var (
	// ErrMissingField marks a required extFields key that is absent.
	ErrMissingField = errors.New("protocol: missing required field")

	// ErrBadField marks an extFields value that does not parse as the
	// field's type (number out of range, not a number, not a boolean).
	ErrBadField = errors.New("protocol: bad field value")
)

// FieldError says which header field is missing or malformed. Its text is
// meant for a response remark, e.g.
//
//	protocol: PullMessageRequestHeader: field "queueId": bad int32 "x"
type FieldError struct {
	Header string // Go type name of the header
	Field  string // extFields key
	Value  string // offending value ("" when missing)
	Kind   string // expected type, e.g. "int32"; "" when missing
	Err    error  // ErrMissingField or ErrBadField
}

func (e *FieldError) Error() string {
	if errors.Is(e.Err, ErrMissingField) {
		return "protocol: " + e.Header + ": missing required field " + strconv.Quote(e.Field)
	}
	v := e.Value
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return "protocol: " + e.Header + ": field " + strconv.Quote(e.Field) + ": bad " + e.Kind + " " + strconv.Quote(v)
}

func (e *FieldError) Unwrap() error { return e.Err }

// ExtHeader is implemented by every typed custom header in this package.
type ExtHeader interface {
	// ToExt writes the header's fields into ext as strings.
	ToExt(ext map[string]string)
	// FromExt reads the header's fields from ext, replacing all of them.
	FromExt(ext map[string]string) error
}

// Ext returns a new extFields map holding h's fields. It is sized for 8
// entries, Go's small map (one group: a third of the time and memory of a
// map sized for 16, measured on a send answer's 5 fields), unless h has
// more (extHint).
func Ext(h interface{ ToExt(map[string]string) }) map[string]string {
	m := make(map[string]string, extHint(h))
	h.ToExt(m)
	return m
}

// extHint is the size of h's map: its ExtLen, or the most fields it may
// have (extLen), or smallExt.
func extHint(h any) int {
	switch l := h.(type) {
	case ExtWriter:
		return l.ExtLen()
	case interface{ extLen() int }:
		return l.extLen()
	}
	return smallExt
}

// smallExt is the most entries a small map holds.
const smallExt = 8

// ExtEncoder receives a header's ext fields one by one.
type ExtEncoder interface {
	Str(key, value string)
	Int(key string, value int64)
	// Bytes is Str of a value in bytes (which it does not keep).
	Bytes(key string, value []byte)
}

// ExtWriter is a header that writes its ext fields without a map: the
// msgpack codec encodes them straight into the frame (remoting.Header's
// ExtWriter). Its fields are the ones ToExt writes, in the same forms.
type ExtWriter interface {
	// ExtLen is how many fields WriteExt writes.
	ExtLen() int
	WriteExt(e ExtEncoder)
}

// MapEncoder is an ExtEncoder that fills a map.
type MapEncoder map[string]string

func (m MapEncoder) Str(key, value string)          { m[key] = value }
func (m MapEncoder) Int(key string, value int64)    { m[key] = strconv.FormatInt(value, 10) }
func (m MapEncoder) Bytes(key string, value []byte) { m[key] = string(value) }

// ExtMap returns w's fields as a new map.
func ExtMap(w ExtWriter) map[string]string {
	m := make(map[string]string, w.ExtLen())
	w.WriteExt(MapEncoder(m))
	return m
}

// ExtPairs is a custom header read without a map: its keys and values in
// the order they came, as spans of one string. Sluice's msgpack codec
// reads a send and its answer so: a span list holds no pointers, so it is
// neither cleared nor scanned by the collector, where a []string of the
// same fields was (a send's header has 14 fields). The zero value holds
// no header (Valid is false).
type ExtPairs struct {
	src  string
	span []uint32 // start and end in src of key 0, value 0, key 1, ...
}

// MakeExtPairs returns the pairs whose strings are src[span[2i]:span[2i+1]]
// (key, value, key, value…). span must be non-nil (empty for no fields)
// and its spans within src.
func MakeExtPairs(src string, span []uint32) ExtPairs { return ExtPairs{src: src, span: span} }

// ExtPairsOf returns kv (key, value, key, value…; an odd last key is
// dropped) as ExtPairs.
func ExtPairsOf(kv ...string) ExtPairs {
	n := len(kv) &^ 1
	size := 0
	for _, s := range kv[:n] {
		size += len(s)
	}
	src := make([]byte, 0, size)
	span := make([]uint32, 0, 2*n)
	for _, s := range kv[:n] {
		span = append(span, uint32(len(src)))
		src = append(src, s...)
		span = append(span, uint32(len(src)))
	}
	return ExtPairs{src: string(src), span: span}
}

// Valid reports whether p holds a header (possibly of no fields).
func (p ExtPairs) Valid() bool { return p.span != nil }

// Len is the number of fields.
func (p ExtPairs) Len() int { return len(p.span) / 4 }

// Key returns field i's key.
func (p ExtPairs) Key(i int) string { return p.src[p.span[4*i]:p.span[4*i+1]] }

// Value returns field i's value.
func (p ExtPairs) Value(i int) string { return p.src[p.span[4*i+2]:p.span[4*i+3]] }

// Clone returns p with a span list of its own (src, a string, is shared).
func (p ExtPairs) Clone() ExtPairs { return ExtPairs{src: p.src, span: slices.Clone(p.span)} }

// CloneIn is Clone with the span list copied to the front of room, when it
// fits there; it returns the rest of room. A decoder cuts the span lists
// of many headers from one block so (one allocation for many).
func (p ExtPairs) CloneIn(room []uint32) (ExtPairs, []uint32) {
	n := len(p.span)
	switch {
	case p.span == nil:
		return p, room // NB: no header stays no header
	case room == nil || n > len(room):
		return p.Clone(), room
	}
	span := room[:n:n] // NB: capped: an append never reaches the next header's
	copy(span, p.span)
	return ExtPairs{src: p.src, span: span}, room[n:]
}

// Strings returns the fields as key, value, key, value…
func (p ExtPairs) Strings() []string {
	kv := make([]string, 0, 2*p.Len())
	for i := range p.Len() {
		kv = append(kv, p.Key(i), p.Value(i))
	}
	return kv
}

// extReader reads typed fields out of an extFields map (or a pair list,
// see FromExtPairs) and keeps the first error, so FromExt bodies are
// straight-line code.
type extReader struct {
	header string
	ext    map[string]string
	// letters holds the fields of one-letter keys a..z, has which are
	// set: used when ext is nil (see FromExtPairs).
	letters [26]string
	has     uint32
	byKey   bool // letters, not ext
	// pairs, when set, holds the fields as key, value, key, value… (a
	// short header read without a map; see FromExtPairs).
	pairs ExtPairs
	err   error
}

// orNoFields is kv, or no fields when kv is invalid (no header): an
// extReader given invalid pairs would read its map.
func orNoFields(kv ExtPairs) ExtPairs {
	if !kv.Valid() {
		return ExtPairsOf()
	}
	return kv
}

// get returns key's value.
func (r *extReader) get(key string) (string, bool) {
	if r.pairs.Valid() {
		// NB: the last of a repeated key counts, as in a map.
		for i := r.pairs.Len() - 1; i >= 0; i-- {
			if r.pairs.Key(i) == key {
				return r.pairs.Value(i), true
			}
		}
		return "", false
	}
	if !r.byKey {
		v, ok := r.ext[key]
		return v, ok
	}
	if len(key) != 1 || key[0] < 'a' || key[0] > 'z' {
		return "", false
	}
	i := key[0] - 'a'
	return r.letters[i], r.has&(1<<i) != 0
}

// readLetters makes r read the one-letter keys of kv; the last of a
// repeated key counts, as in a map decoded from the same fields. Other
// keys are not read.
func (r *extReader) readLetters(kv ExtPairs) {
	r.byKey = true
	for i := range kv.Len() {
		if k0, k1 := kv.span[4*i], kv.span[4*i+1]; k1 == k0+1 {
			if c := kv.src[k0]; c >= 'a' && c <= 'z' {
				r.letters[c-'a'] = kv.Value(i)
				r.has |= 1 << (c - 'a')
			}
		}
	}
}

func (r *extReader) fail(field, value, kind string, sentinel error) {
	if r.err == nil {
		r.err = &FieldError{Header: r.header, Field: field, Value: value, Kind: kind, Err: sentinel}
	}
}

func (r *extReader) lookup(key string, required bool) (string, bool) {
	v, ok := r.get(key)
	if !ok && required {
		r.fail(key, "", "", ErrMissingField)
	}
	return v, ok
}

// str reads a required string.
func (r *extReader) str(key string) string {
	v, _ := r.lookup(key, true)
	return v
}

// optStr reads an optional string ("" when absent).
func (r *extReader) optStr(key string) string {
	v, _ := r.get(key)
	return v
}

func (r *extReader) parseInt(key string, required bool, bits int, kind string) int64 {
	v, ok := r.lookup(key, required)
	if !ok {
		return 0
	}
	n, ok := parseDecimal(v, bits)
	if !ok {
		r.fail(key, v, kind, ErrBadField)
		return 0
	}
	return n
}

// parseDecimal reads a decimal integer of bits bits (32 or 64) as Java's
// parseInt and parseLong do (a sign allowed): atoiShort for what senders
// write, strconv for the rest.
func parseDecimal(v string, bits int) (int64, bool) {
	if n, ok := atoiShort(v); ok && (bits == 64 || n == int64(int32(n))) {
		return n, true
	}
	n, err := strconv.ParseInt(v, 10, bits)
	return n, err == nil
}

// atoiShort parses what senders write for numbers, an optional '-' and
// at most 18 digits, in a third of strconv.ParseInt's instructions (a
// send's header has about ten numbers). ok is false for anything else,
// which strconv then reads or rejects as before.
func atoiShort(s string) (n int64, ok bool) {
	neg := len(s) > 1 && s[0] == '-'
	d := s
	if neg {
		d = s[1:]
	}
	if len(d) == 0 || len(d) > 18 { // NB: 18 digits cannot overflow an int64
		return 0, false
	}
	for i := 0; i < len(d); i++ {
		c := d[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int64(c)
	}
	if neg {
		n = -n
	}
	return n, true
}

func (r *extReader) int32(key string) int32 { return int32(r.parseInt(key, true, 32, "int32")) }
func (r *extReader) int64(key string) int64 { return r.parseInt(key, true, 64, "int64") }
func (r *extReader) optInt32(key string) int32 {
	return int32(r.parseInt(key, false, 32, "int32"))
}
func (r *extReader) optInt64(key string) int64 { return r.parseInt(key, false, 64, "int64") }

// optInt32Ptr reads an optional int32 whose absence matters (nil when
// absent).
func (r *extReader) optInt32Ptr(key string) *int32 {
	if _, ok := r.get(key); !ok {
		return nil
	}
	n := r.optInt32(key)
	return &n
}

func (r *extReader) parseBool(key string, required bool) bool {
	v, ok := r.lookup(key, required)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(key, v, "bool", ErrBadField)
		return false
	}
	return b
}

func (r *extReader) boolean(key string) bool    { return r.parseBool(key, true) }
func (r *extReader) optBool(key string) bool    { return r.parseBool(key, false) }
func itoa32(n int32) string                     { return strconv.FormatInt(int64(n), 10) }
func itoa64(n int64) string                     { return strconv.FormatInt(n, 10) }
func btoa(b bool) string                        { return strconv.FormatBool(b) }
func putOpt(ext map[string]string, k, v string) { putIf(ext, k, v, v != "") }
func putIf(ext map[string]string, k, v string, cond bool) {
	if cond {
		ext[k] = v
	}
}
