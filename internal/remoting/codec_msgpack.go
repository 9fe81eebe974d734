package remoting

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/sluicemq/sluice/internal/protocol"
)

// msgpackCodec is serialize type 2, Sluice's native header: a msgpack map
// with exactly the JSON keys (code, language, version, opaque, flag,
// remark, extFields), language as the enum name, so that it maps
// one-to-one onto the JSON header. Unknown keys are skipped (nesting at
// most msgpackMaxDepth deep); an empty remark and empty extFields are
// omitted on output.
//
// The encoder appends by hand; decoders are pooled and reused. The decoder keeps msgpack's
// allocation limits on and, before reading any string or container, checks
// its claimed length against the bytes left, so a hostile length never
// allocates more than the header itself.
type msgpackCodec struct{}

const msgpackMaxDepth = 16

func (msgpackCodec) AppendHeader(dst []byte, h *Header) ([]byte, error) {
	if h.ExtPairs.Valid() && h.ExtFields == nil {
		h = withExtMap(h) // NB: a decoded send header, sent on: rare
	}
	n := 5
	if h.Remark != "" {
		n++
	}
	w := h.ExtWriter
	if h.ExtFields != nil {
		w = nil // NB: as withExtMap: a map wins
	}
	if len(h.ExtFields) > 0 || w != nil && w.ExtLen() > 0 {
		n++
	}
	// NB: written by hand, byte for byte what msgpack.Encoder writes
	// (smallest int and length forms; TestMsgpack_EncoderMatchesLibrary),
	// without its per-value interface calls.
	dst = mpMapLen(dst, n)
	dst = mpStr(dst, "code")
	dst = mpInt(dst, int64(h.Code))
	dst = mpStr(dst, "language")
	dst = mpStr(dst, languageName(h.Language))
	dst = mpStr(dst, "version")
	dst = mpInt(dst, int64(h.Version))
	dst = mpStr(dst, "opaque")
	dst = mpInt(dst, int64(h.Opaque))
	dst = mpStr(dst, "flag")
	dst = mpInt(dst, int64(h.Flag))
	if h.Remark != "" {
		dst = mpStr(dst, "remark")
		dst = mpStr(dst, h.Remark)
	}
	switch {
	case len(h.ExtFields) > 0:
		dst = mpStr(dst, "extFields")
		dst = mpMapLen(dst, len(h.ExtFields))
		for k, v := range h.ExtFields {
			dst = mpStr(dst, k)
			dst = mpStr(dst, v)
		}
	case w != nil && w.ExtLen() > 0:
		dst = mpStr(dst, "extFields")
		dst = mpMapLen(dst, w.ExtLen())
		// NB: from a pool: passed as an interface, a fresh one per frame
		// would be a heap allocation per message.
		e := mpExts.Get().(*mpExt)
		e.dst, e.n = dst, 0
		w.WriteExt(e)
		n := e.n
		dst, e.dst = e.dst, nil
		mpExts.Put(e)
		if n != w.ExtLen() {
			return dst, badHeader("%T wrote %d ext fields, ExtLen says %d", w, n, w.ExtLen())
		}
	}
	return dst, nil
}

var mpExts = sync.Pool{New: func() any { return new(mpExt) }}

// mpExt encodes ext fields from a protocol.ExtWriter: strings, numbers in
// decimal (as ToExt writes them), no map.
type mpExt struct {
	dst []byte
	n   int
}

func (e *mpExt) Str(key, value string) {
	e.dst = mpStr(mpStr(e.dst, key), value)
	e.n++
}

func (e *mpExt) Bytes(key string, value []byte) {
	e.dst = mpStr(mpStr(e.dst, key), value)
	e.n++
}

func (e *mpExt) Int(key string, value int64) {
	e.dst = mpStr(e.dst, key)
	var b [20]byte
	num := strconv.AppendInt(b[:0], value, 10)
	e.dst = append(e.dst, msgpcode.FixedStrLow|byte(len(num))) // NB: at most 20 bytes, a fixstr
	e.dst = append(e.dst, num...)
	e.n++
}

func mpMapLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, msgpcode.FixedMapLow|byte(n))
	case n <= math.MaxUint16:
		return append(dst, msgpcode.Map16, byte(n>>8), byte(n))
	}
	return append(dst, msgpcode.Map32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func mpStr[S string | []byte](dst []byte, s S) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, msgpcode.FixedStrLow|byte(n))
	case n < 256:
		dst = append(dst, msgpcode.Str8, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, msgpcode.Str16, byte(n>>8), byte(n))
	default:
		dst = append(dst, msgpcode.Str32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, s...)
}

func mpInt(dst []byte, v int64) []byte {
	if v >= 0 {
		switch u := uint64(v); {
		case u <= math.MaxInt8:
			return append(dst, byte(u))
		case u <= math.MaxUint8:
			return append(dst, msgpcode.Uint8, byte(u))
		case u <= math.MaxUint16:
			return append(dst, msgpcode.Uint16, byte(u>>8), byte(u))
		case u <= math.MaxUint32:
			return append(dst, msgpcode.Uint32, byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
		default:
			return binary.BigEndian.AppendUint64(append(dst, msgpcode.Uint64), u)
		}
	}
	switch {
	case v >= int64(int8(msgpcode.NegFixedNumLow)):
		return append(dst, byte(v))
	case v >= math.MinInt8:
		return append(dst, msgpcode.Int8, byte(v))
	case v >= math.MinInt16:
		return append(dst, msgpcode.Int16, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(dst, msgpcode.Int32, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, msgpcode.Int64), uint64(v))
}

// sliceReader is the decoder's input: an io.Reader and io.ByteScanner over
// one header, which also hands out string bytes without copying them.
type sliceReader struct {
	b []byte
	i int
}

func (r *sliceReader) Read(p []byte) (int, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.i:])
	r.i += n
	return n, nil
}

func (r *sliceReader) ReadByte() (byte, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	c := r.b[r.i]
	r.i++
	return c, nil
}

func (r *sliceReader) UnreadByte() error {
	if r.i == 0 {
		return errors.New("remoting: unread at start")
	}
	r.i--
	return nil
}

func (r *sliceReader) left() int { return len(r.b) - r.i }

// peek returns the next byte without consuming it.
func (r *sliceReader) peek() (byte, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	return r.b[r.i], true
}

// take returns the next n bytes, or an error if fewer are left.
func (r *sliceReader) take(n int) ([]byte, error) {
	if n < 0 || n > r.left() {
		return nil, badHeader("msgpack: length %d with %d bytes left", n, r.left())
	}
	p := r.b[r.i : r.i+n]
	r.i += n
	return p, nil
}

type msgpackDecoder struct {
	r      sliceReader
	dec    *msgpack.Decoder
	span   []uint32 // extPairs' scratch, reused
	kept   []uint32 // room for the span lists of the headers kept as pairs
	values int      // map entries and array elements met (checkMsgpackBody's count)
}

var msgpackDecoders = sync.Pool{New: func() any {
	d := &msgpackDecoder{}
	d.dec = msgpack.NewDecoder(&d.r)
	return d
}}

func (msgpackCodec) DecodeHeader(src []byte, h *Header) error {
	d := msgpackDecoders.Get().(*msgpackDecoder)
	d.r = sliceReader{b: src}
	err := d.header(h)
	if err != nil {
		h.ExtPairs = protocol.ExtPairs{} // NB: d.span, reused
	}
	d.r = sliceReader{}
	msgpackDecoders.Put(d)
	return err
}

func (d *msgpackDecoder) header(h *Header) error {
	*h = Header{Language: protocol.LanguageOther}
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	if n < 0 {
		return badHeader("msgpack header is nil")
	}
	for i := 0; i < n; i++ {
		key, err := d.bytes()
		if err != nil {
			return err
		}
		switch string(key) { // NB: no allocation for a switch on string(bytes)
		case "code":
			h.Code, err = decodeIntN[int16](d, "code")
		case "language":
			h.Language, err = d.language()
		case "version":
			h.Version, err = decodeIntN[int16](d, "version")
		case "opaque":
			h.Opaque, err = decodeIntN[int32](d, "opaque")
		case "flag":
			h.Flag, err = decodeIntN[int32](d, "flag")
		case "remark":
			h.Remark, err = d.str()
		case "extFields":
			h.ExtPairs, err = d.extPairs() // NB: made a map below unless a send's or a pull's
		default:
			err = d.skip(0)
		}
		if err != nil {
			return err
		}
	}
	if d.r.left() != 0 {
		return badHeader("%d trailing bytes after msgpack header", d.r.left())
	}
	// NB: decided once every field is read, whatever their order; the
	// pairs' spans are in d.span, reused.
	switch {
	case !h.ExtPairs.Valid():
	case (h.Code == protocol.SendMessageV2 || h.Code == protocol.SendBatchMessage) && h.Flag&FlagResponse == 0,
		h.Flag&FlagResponse != 0: // NB: the waiting call decides (Conn.deliver)
		if n := 4 * h.ExtPairs.Len(); len(d.kept) < n && n <= keptSpans {
			d.kept = make([]uint32, keptSpans)
		}
		h.ExtPairs, d.kept = h.ExtPairs.CloneIn(d.kept)
	case h.Code == protocol.PullMessage:
		// NB: a list of its own, not a share of d.kept: a parked pull
		// keeps its request for up to its suspend time (20 s), and would
		// keep the whole block.
		h.ExtPairs = h.ExtPairs.Clone()
	default:
		h.ExtFields, h.ExtPairs = h.ExtMap(), protocol.ExtPairs{}
	}
	return nil
}

// keptSpans is the size of the blocks the span lists of headers kept as
// pairs are cut from: a send's header (about 14 fields, 56 spans) costs a
// share of one allocation, not one of its own. A block lives while any
// header cut from it does: a send's, until it is answered.
const keptSpans = 2048

func wrapMsgpack(err error) error {
	if err == nil || errors.Is(err, ErrBadHeader) {
		return err
	}
	return badHeader("msgpack: %v", err)
}

// mapLen reads a map header, checking the claimed size against the input:
// every entry takes at least two bytes.
func (d *msgpackDecoder) mapLen() (int, error) {
	var n int
	var err error
	if c, ok := d.r.peek(); ok && c >= 0x80 && c <= 0x8f { // NB: fixmap, read here: the common case
		d.r.i++
		n = int(c & 0x0f)
	} else if n, err = d.dec.DecodeMapLen(); err != nil {
		return 0, wrapMsgpack(err)
	}
	if n > d.r.left()/2 {
		return 0, badHeader("msgpack: map of %d entries with %d bytes left", n, d.r.left())
	}
	d.values += max(n, 0)
	return n, nil
}

// bytes reads a string (or bin, or nil as empty) and returns its bytes in
// the input, after checking its claimed length against what is left.
func (d *msgpackDecoder) bytes() ([]byte, error) {
	// NB: fixstr and str8, the common cases, are read here without a
	// call (a header has some fifty strings); the decoder reads the rest.
	b := d.r.b[d.r.i:]
	var n, hl int
	switch {
	case len(b) >= 1 && b[0] >= 0xa0 && b[0] <= 0xbf:
		n, hl = int(b[0]&0x1f), 1
	case len(b) >= 2 && b[0] == 0xd9:
		n, hl = int(b[1]), 2
	default:
		var err error
		if n, err = d.dec.DecodeBytesLen(); err != nil {
			return nil, wrapMsgpack(err)
		}
		if n <= 0 {
			return nil, nil
		}
		return d.r.take(n)
	}
	if n > len(b)-hl {
		d.r.i += hl
		return d.r.take(n) // NB: the error
	}
	d.r.i += hl + n
	if n == 0 {
		return nil, nil
	}
	return b[hl : hl+n], nil
}

// str reads a string (or bin, or nil as ""), copying it out of the input.
func (d *msgpackDecoder) str() (string, error) {
	p, err := d.bytes()
	return string(p), err
}

type intN interface{ ~int16 | ~int32 }

func decodeIntN[T intN](d *msgpackDecoder, key string) (T, error) {
	v, ok := d.fixedInt()
	if !ok {
		var err error
		if v, err = d.dec.DecodeInt64(); err != nil {
			return 0, wrapMsgpack(err)
		}
	}
	if int64(T(v)) != v {
		return 0, badHeader("msgpack: %s %d out of range", key, v)
	}
	return T(v), nil
}

// fixedInt reads a fixint or an int or uint of 8, 16 or 32 bits, what
// an opaque, a code or a version is written as, without the library's
// reader (a call through io.ReadAtLeast per value). ok is false, having
// read nothing, for anything else.
func (d *msgpackDecoder) fixedInt() (v int64, ok bool) {
	b := d.r.b[d.r.i:]
	if len(b) == 0 {
		return 0, false
	}
	n := 1
	switch c := b[0]; {
	case c <= 0x7f:
		v = int64(c)
	case c >= 0xe0:
		v = int64(int8(c))
	case c == msgpcode.Uint8 && len(b) >= 2:
		v, n = int64(b[1]), 2
	case c == msgpcode.Uint16 && len(b) >= 3:
		v, n = int64(binary.BigEndian.Uint16(b[1:])), 3
	case c == msgpcode.Uint32 && len(b) >= 5:
		v, n = int64(binary.BigEndian.Uint32(b[1:])), 5
	case c == msgpcode.Int8 && len(b) >= 2:
		v, n = int64(int8(b[1])), 2
	case c == msgpcode.Int16 && len(b) >= 3:
		v, n = int64(int16(binary.BigEndian.Uint16(b[1:]))), 3
	case c == msgpcode.Int32 && len(b) >= 5:
		v, n = int64(int32(binary.BigEndian.Uint32(b[1:]))), 5
	default:
		return 0, false
	}
	d.r.i += n
	return v, true
}

// language accepts the enum name (what Sluice writes) or its ordinal.
func (d *msgpackDecoder) language() (protocol.LanguageCode, error) {
	c, err := d.dec.PeekCode()
	if err != nil {
		return 0, wrapMsgpack(err)
	}
	if msgpcode.IsString(c) || msgpcode.IsBin(c) || c == msgpcode.Nil {
		s, err := d.str()
		if err != nil {
			return 0, err
		}
		l, _ := protocol.ParseLanguage(s)
		return l, nil
	}
	v, err := d.dec.DecodeInt64()
	if err != nil {
		return 0, wrapMsgpack(err)
	}
	if v < 0 || v > math.MaxUint8 || !protocol.LanguageCode(v).Valid() {
		return protocol.LanguageOther, nil
	}
	return protocol.LanguageCode(v), nil
}

// extPairs reads an extFields map as key, value, key, value…; header
// makes it a map unless the header is a send request's, whose handler
// reads a dozen fields once (a map of 14 entries is a table: decoding one
// was a tenth of a broker's CPU on plain sends). Keys and values are
// substrings of one copy of the rest of the header: one allocation for
// them all, and no lookups. The pairs are in d.kv, reused by the next
// header.
func (d *msgpackDecoder) extPairs() (protocol.ExtPairs, error) {
	n, err := d.mapLen()
	if err != nil || n <= 0 {
		return protocol.ExtPairs{}, err
	}
	if n > MaxExtFields {
		return protocol.ExtPairs{}, badHeader("%d extFields, limit %d", n, MaxExtFields)
	}
	base := d.r.i
	all := string(d.r.b[base:])
	span := slices.Grow(d.span[:0], 4*n)[:4*n]
	d.span = span
	// NB: fixstr and str8 are read in the loop, on locals (a call of
	// bytes per string was half of a send header's decoding); bytes
	// reads any other form, or fails.
	b, i := d.r.b, d.r.i
	for j := 0; j < len(span); j += 2 {
		var n int
		switch {
		case i < len(b) && b[i] >= 0xa0 && b[i] <= 0xbf:
			n, i = int(b[i]&0x1f), i+1
		case i+1 < len(b) && b[i] == 0xd9:
			n, i = int(b[i+1]), i+2
		default:
			d.r.i = i
			p, err := d.bytes()
			if err != nil {
				return protocol.ExtPairs{}, err
			}
			n, i = len(p), d.r.i-len(p)
		}
		if n > len(b)-i {
			d.r.i = i
			return protocol.ExtPairs{}, badHeader("msgpack: length %d with %d bytes left", n, len(b)-i)
		}
		span[j], span[j+1] = uint32(i-base), uint32(i-base+n)
		i += n
	}
	d.r.i = i
	return protocol.MakeExtPairs(all, span), nil
}

// skip skips one value of an unknown key. Containers recurse at most
// msgpackMaxDepth levels; strings, bin and ext payloads are skipped by
// length after a bounds check.
func (d *msgpackDecoder) skip(depth int) error {
	if depth > msgpackMaxDepth {
		return badHeader("msgpack: nesting deeper than %d", msgpackMaxDepth)
	}
	c, err := d.dec.PeekCode()
	if err != nil {
		return wrapMsgpack(err)
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.mapLen()
		if err != nil {
			return err
		}
		for i := 0; i < 2*n; i++ {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.dec.DecodeArrayLen()
		if err != nil {
			return wrapMsgpack(err)
		}
		if n > d.r.left() {
			return badHeader("msgpack: array of %d with %d bytes left", n, d.r.left())
		}
		d.values += max(n, 0)
		for i := 0; i < n; i++ {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		_, err := d.bytes()
		return err
	case msgpcode.IsExt(c):
		_, n, err := d.dec.DecodeExtHeader()
		if err != nil {
			return wrapMsgpack(err)
		}
		_, err = d.r.take(n)
		return err
	}
	return wrapMsgpack(d.dec.Skip()) // a scalar
}
