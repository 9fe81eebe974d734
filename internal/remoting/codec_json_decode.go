package remoting

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sluicemq/sluice/internal/protocol"
)

// jsonDecoder is a small JSON reader for the one shape a command header
// has. It replaces encoding/json on the hot path of every request from the
// official clients (on a real SEND_MESSAGE header: 1.9 µs and 27
// allocations against encoding/json's 6.7 µs and 50) and follows
// encoding/json's semantics where they matter (FuzzHeaderJSON checks it
// against encoding/json):
//
//   - the input must be one object and nothing else but whitespace;
//   - version, opaque and flag are integers in their type's range (no
//     fraction or exponent), or null (zero); code is an int32 or null, and
//     one outside int16 is a *CodeRangeError once the rest is read;
//   - language is a string or null;
//   - strings are unescaped (\uXXXX with surrogate pairs); invalid UTF-8
//     and lone surrogates become U+FFFD; raw control characters are errors;
//   - other keys are skipped after checking they are valid JSON, at most
//     jsonMaxDepth levels deep; keys match exactly (encoding/json would
//     also match "CODE"); a repeated key replaces the earlier value.
//
// Lenient where the Java broker is (STYLE §4.13): it reads the header with
// fastjson into a RemotingCommand whose remark is a String and whose
// extFields is a HashMap<String, String>, and fastjson's StringCodec turns
// any JSON value into a String. So remark and each extFields value may be
// any JSON value (see text):
//
//   - a string is its contents; null is no value: an empty remark, and an
//     extFields key that is absent (Java stores null, which every header
//     reader treats as absent; Sluice drops the key, so a null optional
//     field reads as missing, not as a malformed "");
//   - a number is its text as written ("0", "-1", "1764590000000",
//     "1.50", "1e3"). fastjson keeps an integer's text too, but reads a
//     fraction or exponent as a BigDecimal ("1e3" becomes "1E+3"); no
//     header field is fractional and both spellings fail an integer field
//     alike, so Sluice keeps the text;
//   - true and false are "true" and "false";
//   - an object or array is its JSON text without insignificant
//     whitespace, as fastjson writes a JSONObject (which may also reorder
//     keys and respell strings; Sluice keeps them as written).
//
// extFields itself is an object or null.
type jsonDecoder struct {
	b        []byte
	i        int
	wideCode int64 // a code outside int16 (0: none)
}

const jsonMaxDepth = 64

func decodeJSONHeader(src []byte, h *Header) error {
	d := jsonDecoder{b: src}
	*h = Header{Language: protocol.LanguageOther}
	d.ws()
	if !d.consume('{') {
		return badHeader("JSON header is not an object")
	}
	for first := true; ; first = false {
		key, done, err := d.nextMember(first)
		if err != nil {
			return err
		}
		if done {
			break
		}
		if err := d.field(key, h); err != nil {
			return err
		}
	}
	d.ws()
	if d.i != len(d.b) {
		return d.errorf("data after the header object")
	}
	if d.wideCode != 0 {
		return &CodeRangeError{Code: int32(d.wideCode)}
	}
	return nil
}

func (d *jsonDecoder) errorf(what string) error {
	return badHeader("JSON: %s at offset %d", what, d.i)
}

func (d *jsonDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonDecoder) consume(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// items reads the items of an object or array whose opening bracket is
// consumed, up to its closing bracket end, with item.
func (d *jsonDecoder) items(end byte, item func() error) error {
	d.ws()
	if d.consume(end) {
		return nil
	}
	for {
		d.ws()
		if err := item(); err != nil {
			return err
		}
		d.ws()
		if d.consume(',') {
			continue
		}
		if d.consume(end) {
			return nil
		}
		return d.errorf("expected ',' or '" + string(end) + "'")
	}
}

// nextMember reads up to the value of the next member of an object whose
// '{' is consumed (first: none read yet) and returns its key; done at the
// closing '}'. The hot objects (the header, extFields) are read with it:
// a loop, where members' callbacks cost a tenth of the decode.
func (d *jsonDecoder) nextMember(first bool) (key []byte, done bool, err error) {
	d.ws()
	switch {
	case first && d.consume('}'):
		return nil, true, nil
	case first:
	case d.consume(','):
		d.ws()
	case d.consume('}'):
		return nil, true, nil
	default:
		return nil, false, d.errorf("expected ',' or '}'")
	}
	if key, err = d.key(); err != nil {
		return nil, false, err
	}
	d.ws()
	if !d.consume(':') {
		return nil, false, d.errorf("expected ':'")
	}
	d.ws()
	return key, false, nil
}

// members reads the members of an object whose '{' is consumed: value
// reads the value of each, given its key (see key).
func (d *jsonDecoder) members(value func(key []byte) error) error {
	return d.items('}', func() error {
		key, err := d.key()
		if err != nil {
			return err
		}
		d.ws()
		if !d.consume(':') {
			return d.errorf("expected ':'")
		}
		d.ws()
		return value(key)
	})
}

func (d *jsonDecoder) literal(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// key reads an object key. Keys without escapes alias the input (no
// allocation); the caller must not keep them.
func (d *jsonDecoder) key() ([]byte, error) {
	raw, escaped, err := d.scanString()
	if err != nil {
		return nil, err
	}
	if !escaped {
		return raw, nil
	}
	return []byte(unescape(raw)), nil
}

func (d *jsonDecoder) field(key []byte, h *Header) error {
	var err error
	switch string(key) {
	case "code":
		// NB: an int, as Java reads it; one outside int16 is answered
		// REQUEST_CODE_NOT_SUPPORTED (see CodeRangeError).
		var v int64
		v, err = d.integer(32)
		h.Code, d.wideCode = int16(v), 0
		if int64(h.Code) != v {
			h.Code, d.wideCode = 0, v
		}
	case "version":
		var v int64
		v, err = d.integer(16)
		h.Version = int16(v)
	case "opaque":
		var v int64
		v, err = d.integer(32)
		h.Opaque = int32(v)
	case "flag":
		var v int64
		v, err = d.integer(32)
		h.Flag = int32(v)
	case "language":
		var s string
		s, err = d.nullableString()
		h.Language, _ = protocol.ParseLanguage(s)
	case "remark":
		h.Remark, _, err = d.text()
	case "extFields":
		h.ExtFields, err = d.extFields()
	default:
		err = d.skip(0)
	}
	return err
}

// integer reads a JSON integer that fits in bits, or null (0).
func (d *jsonDecoder) integer(bits int) (int64, error) {
	if d.literal("null") {
		return 0, nil
	}
	start := d.i
	if err := d.scanNumber(); err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(d.b[start:d.i]), 10, bits)
	if err != nil {
		return 0, badHeader("JSON: %q is not an int%d", d.b[start:d.i], bits)
	}
	return v, nil
}

// scanNumber checks the JSON number grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *jsonDecoder) scanNumber() error {
	d.consume('-')
	switch {
	case d.consume('0'):
	case d.i < len(d.b) && d.b[d.i] >= '1' && d.b[d.i] <= '9':
		d.digits()
	default:
		return d.errorf("bad number")
	}
	if d.consume('.') {
		if d.digits() == 0 {
			return d.errorf("bad number")
		}
	}
	if d.consume('e') || d.consume('E') {
		if !d.consume('+') {
			d.consume('-')
		}
		if d.digits() == 0 {
			return d.errorf("bad number")
		}
	}
	return nil
}

func (d *jsonDecoder) digits() int {
	n := 0
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

func (d *jsonDecoder) nullableString() (string, error) {
	if d.literal("null") {
		return "", nil
	}
	raw, escaped, err := d.scanString()
	if err != nil {
		return "", err
	}
	if escaped {
		return unescape(raw), nil
	}
	return string(raw), nil
}

func (d *jsonDecoder) extFields() (map[string]string, error) {
	if d.literal("null") {
		return nil, nil
	}
	if !d.consume('{') {
		return nil, d.errorf("extFields is not an object")
	}
	// NB: entries are collected first so the map is made once at its
	// size; growing it from a guess was a fifth of the decode time.
	var stack [24]extEntry
	entries := stack[:0]
	nulls := 0
	for first := true; ; first = false {
		key, done, err := d.nextMember(first)
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
		v, ok, err := d.text()
		if err != nil {
			return nil, err
		}
		if len(entries) == MaxExtFields {
			return nil, badHeader("more than %d extFields", MaxExtFields)
		}
		if !ok {
			nulls++
		}
		entries = append(entries, extEntry{string(key), v, ok})
	}
	if nulls == len(entries) {
		return nil, nil
	}
	m := make(map[string]string, len(entries)-nulls)
	for _, e := range entries {
		if e.ok {
			m[e.k] = e.v
		} else {
			delete(m, e.k) // NB: a later null replaces an earlier value
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

type extEntry struct {
	k, v string
	ok   bool // false: the value was null
}

// text reads any JSON value as the Java broker reads it into a String
// (see jsonDecoder): a string's contents, the text of a number, true or
// false, the compact JSON text of an object or array; ok is false for
// null.
func (d *jsonDecoder) text() (v string, ok bool, err error) {
	if d.i < len(d.b) && d.b[d.i] == '"' {
		v, err = d.str()
		return v, err == nil, err
	}
	if d.literal("null") {
		return "", false, nil
	}
	start := d.i
	if err := d.skip(0); err != nil {
		return "", false, err
	}
	if raw := d.b[start:d.i]; raw[0] == '{' || raw[0] == '[' {
		return compactJSON(raw), true, nil
	}
	return string(d.b[start:d.i]), true, nil
}

// compactJSON returns raw, a JSON value skip has checked, without the
// whitespace outside its strings; invalid UTF-8 in it becomes U+FFFD.
func compactJSON(raw []byte) string {
	var sb strings.Builder
	sb.Grow(len(raw))
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = c == '\\'
			inString = c != '"'
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		sb.WriteByte(c)
	}
	return strings.ToValidUTF8(sb.String(), "\uFFFD")
}

// str reads a string token as a new string.
func (d *jsonDecoder) str() (string, error) {
	raw, escaped, err := d.scanString()
	if err != nil {
		return "", err
	}
	if escaped {
		return unescape(raw), nil
	}
	return string(raw), nil
}

// scanString reads a string token and returns its raw contents (between
// the quotes) and whether they need unescaping: they contain a backslash
// or bytes that are not valid UTF-8.
func (d *jsonDecoder) scanString() (raw []byte, escaped bool, err error) {
	if !d.consume('"') {
		return nil, false, d.errorf("expected a string")
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			raw = d.b[start:d.i]
			d.i++
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			d.i++
			if d.i >= len(d.b) {
				return nil, false, d.errorf("unterminated string")
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if len(d.b)-d.i < 5 || !isHex4(d.b[d.i+1:d.i+5]) {
					return nil, false, d.errorf(`bad \u escape`)
				}
				d.i += 5
			default:
				return nil, false, d.errorf("bad escape")
			}
		case c < 0x20:
			return nil, false, d.errorf("control character in string")
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, size := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				escaped = true // replaced by U+FFFD in unescape
			}
			d.i += size
		}
	}
	return nil, false, d.errorf("unterminated string")
}

func isHex4(p []byte) bool {
	for _, c := range p[:4] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(p []byte) rune {
	v, _ := strconv.ParseUint(string(p[:4]), 16, 32)
	return rune(v)
}

// unescape decodes the contents of a string token already checked by
// scanString. It writes into a strings.Builder so the result is not copied
// again.
func unescape(raw []byte) string {
	var sb strings.Builder
	sb.Grow(len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			if c < utf8.RuneSelf {
				sb.WriteByte(c)
				i++
				continue
			}
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				sb.WriteRune(utf8.RuneError)
			} else {
				sb.Write(raw[i : i+size])
			}
			i += size
			continue
		}
		e := raw[i+1]
		i += 2
		switch e {
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r := hex4(raw[i:])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2 = hex4(raw[i+2:])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			sb.WriteRune(r)
		default: // '"', '\\', '/'
			sb.WriteByte(e)
		}
	}
	return sb.String()
}

// skip checks and skips one JSON value.
func (d *jsonDecoder) skip(depth int) error {
	if depth > jsonMaxDepth {
		return d.errorf("nesting too deep")
	}
	if d.i >= len(d.b) {
		return d.errorf("unexpected end")
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, _, err := d.scanString()
		return err
	case c == '{':
		d.i++
		return d.members(func([]byte) error { return d.skip(depth + 1) })
	case c == '[':
		d.i++
		return d.items(']', func() error { return d.skip(depth + 1) })
	case c == 't':
		if d.literal("true") {
			return nil
		}
	case c == 'f':
		if d.literal("false") {
			return nil
		}
	case c == 'n':
		if d.literal("null") {
			return nil
		}
	case c == '-' || c >= '0' && c <= '9':
		return d.scanNumber()
	}
	return d.errorf("bad value")
}
