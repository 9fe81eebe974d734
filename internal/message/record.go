package message

import (
	"bytes"
	"fmt"
	"net/netip"
)

// Record is a zero-copy view of one stored v1 record. Body, Topic and
// Properties alias the decoded bytes (with their capacity capped), so the
// Record is valid only as long as those bytes are not reused.
type Record struct {
	TotalSize                 int32
	BodyCRC                   int32 // as stored; Decode does not check it
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	PhysicalOffset            int64
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  netip.AddrPort
	StoreTimestamp            int64
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	Topic                     []byte
	Properties                []byte
}

// Message returns r as a Message, copying Topic and Properties into strings.
// Body still aliases the record.
func (r *Record) Message() Message {
	return Message{
		Topic:                     string(r.Topic),
		QueueID:                   r.QueueID,
		Flag:                      r.Flag,
		SysFlag:                   r.SysFlag,
		BornTimestamp:             r.BornTimestamp,
		BornHost:                  r.BornHost,
		StoreTimestamp:            r.StoreTimestamp,
		StoreHost:                 r.StoreHost,
		ReconsumeTimes:            r.ReconsumeTimes,
		PreparedTransactionOffset: r.PreparedTransactionOffset,
		Body:                      r.Body,
		Properties:                string(r.Properties),
	}
}

// span holds the checked positions of a record's variable parts.
type span struct {
	f                      fields
	sysFlag                int32
	body, topic, props     int // start offsets
	bodyEnd, topicEnd, end int // end == TOTALSIZE
}

// checkHeader checks MAGICCODE and 91 <= TOTALSIZE <= len(rec) and returns
// TOTALSIZE.
func checkHeader(rec []byte) (int, error) {
	if len(rec) < OffMagic+LenInt32 {
		return 0, fmt.Errorf("%w: %d bytes, too short for TOTALSIZE and MAGICCODE", ErrMalformed, len(rec))
	}
	switch magic := getI32(rec, OffMagic); magic {
	case MagicV1:
	case MagicBlank:
		return 0, fmt.Errorf("%w: MAGICCODE is the blank filler 0xCBD43194, not a message", ErrMalformed)
	case MagicV2:
		return 0, fmt.Errorf("%w: MAGICCODE 0xDAA320AB is v2; only v1 is supported", ErrMalformed)
	default:
		return 0, fmt.Errorf("%w: MAGICCODE 0x%08X is not v1 (0xDAA320A7)", ErrMalformed, uint32(magic))
	}
	size := getI32(rec, OffTotalSize)
	if size < MinRecordSize {
		return 0, fmt.Errorf("%w: TOTALSIZE %d below the minimum %d", ErrMalformed, size, MinRecordSize)
	}
	if int64(size) > int64(len(rec)) {
		return 0, fmt.Errorf("%w: TOTALSIZE %d exceeds the %d bytes available", ErrMalformed, size, len(rec))
	}
	return int(size), nil
}

// checkLengths checks the host ports and that BODYLENGTH, TOPICLENGTH and
// PROPERTIESLENGTH add up to len(rec), which is TOTALSIZE.
// REQUIRES: checkHeader(rec) == len(rec).
func checkLengths(rec []byte) (span, error) {
	size := len(rec)
	var s span
	s.sysFlag = getI32(rec, OffSysFlag)
	s.f = layoutFor(s.sysFlag)
	if need := s.f.minSize(); size < need {
		return s, fmt.Errorf("%w: TOTALSIZE %d too small for the hosts of SYSFLAG 0x%X (minimum %d)",
			ErrMalformed, size, s.sysFlag, need)
	}
	if _, ok := readHost(rec[s.f.bornHost : s.f.bornHost+s.f.bornHostLen]); !ok {
		return s, fmt.Errorf("%w: BORNHOST port %d outside 0..65535",
			ErrMalformed, getI32(rec, s.f.bornHost+s.f.bornHostLen-LenInt32))
	}
	if _, ok := readHost(rec[s.f.storeHost : s.f.storeHost+s.f.storeHostLen]); !ok {
		return s, fmt.Errorf("%w: STOREHOST port %d outside 0..65535",
			ErrMalformed, getI32(rec, s.f.storeHost+s.f.storeHostLen-LenInt32))
	}

	s.body = s.f.bodyLength + LenBodyLength
	bodyLen := getI32(rec, s.f.bodyLength)
	// NB: minSize guarantees size-s.body >= LenTopicLen+LenPropsLen, and
	// every comparison below is against what is left, so nothing overflows.
	if bodyLen < 0 || int64(bodyLen) > int64(size-s.body-LenTopicLen-LenPropsLen) {
		return s, fmt.Errorf("%w: BODYLENGTH %d does not fit TOTALSIZE %d", ErrMalformed, bodyLen, size)
	}
	s.bodyEnd = s.body + int(bodyLen)

	topicLen := int(int8(rec[s.bodyEnd])) // a Java byte: signed
	s.topic = s.bodyEnd + LenTopicLen
	if topicLen <= 0 {
		return s, fmt.Errorf("%w: TOPICLENGTH %d outside 1..%d", ErrMalformed, topicLen, MaxTopicLen)
	}
	if topicLen > size-s.topic-LenPropsLen {
		return s, fmt.Errorf("%w: TOPICLENGTH %d does not fit TOTALSIZE %d", ErrMalformed, topicLen, size)
	}
	s.topicEnd = s.topic + topicLen

	propsLen := int(getI16(rec, s.topicEnd))
	s.props = s.topicEnd + LenPropsLen
	if propsLen < 0 {
		return s, fmt.Errorf("%w: PROPERTIESLENGTH %d is negative", ErrMalformed, propsLen)
	}
	if s.props+propsLen != size {
		return s, fmt.Errorf("%w: field lengths add up to %d bytes, TOTALSIZE is %d",
			ErrMalformed, s.props+propsLen, size)
	}
	s.end = size
	return s, nil
}

// parse checks the structure of the record at the start of rec and returns
// the record (exactly TOTALSIZE bytes) and its span.
func parse(rec []byte) ([]byte, span, error) {
	size, err := checkHeader(rec)
	if err != nil {
		return nil, span{}, err
	}
	rec = rec[:size]
	s, err := checkLengths(rec)
	return rec, s, err
}

// parseAt is parse for a record that must say it is at at
// (PHYSICALOFFSET), checked between the header and the lengths.
func parseAt(rec []byte, at int64) ([]byte, span, error) {
	size, err := checkHeader(rec)
	if err != nil {
		return nil, span{}, err
	}
	rec = rec[:size]
	if pos := getI64(rec, OffPhysicalOffset); pos != at {
		return nil, span{}, fmt.Errorf("%w: PHYSICALOFFSET %d, but the record is at %d", ErrMalformed, pos, at)
	}
	s, err := checkLengths(rec)
	return rec, s, err
}

// Decode decodes the v1 record at the start of rec. rec may extend past the
// record (a pull body, a read buffer); the record is TotalSize bytes. Decode
// checks the structure (magic, TOTALSIZE, lengths, host ports) but not
// PHYSICALOFFSET or BODYCRC; use Validate for that. It never panics, and its
// errors wrap ErrMalformed and name the field.
func Decode(rec []byte) (Record, error) {
	rec, s, err := parse(rec)
	if err != nil {
		return Record{}, err
	}
	f := s.f
	r := Record{
		TotalSize:                 int32(s.end),
		BodyCRC:                   getI32(rec, OffBodyCRC),
		QueueID:                   getI32(rec, OffQueueID),
		Flag:                      getI32(rec, OffFlag),
		QueueOffset:               getI64(rec, OffQueueOffset),
		PhysicalOffset:            getI64(rec, OffPhysicalOffset),
		SysFlag:                   s.sysFlag,
		BornTimestamp:             getI64(rec, OffBornTimestamp),
		StoreTimestamp:            getI64(rec, f.storeTimestamp),
		ReconsumeTimes:            getI32(rec, f.reconsumeTimes),
		PreparedTransactionOffset: getI64(rec, f.preparedTx),
		Body:                      rec[s.body:s.bodyEnd:s.bodyEnd],
		Topic:                     rec[s.topic:s.topicEnd:s.topicEnd],
		Properties:                rec[s.props:s.end:s.end],
	}
	r.BornHost, _ = readHost(rec[f.bornHost : f.bornHost+f.bornHostLen])
	r.StoreHost, _ = readHost(rec[f.storeHost : f.storeHost+f.storeHostLen])
	return r, nil
}

// Validate is the deep check recovery runs on the record at the start of rec,
// which the commitlog found at position at (STYLE §4.3, items 3-6, in this
// order): MAGICCODE is v1; 91 <= TOTALSIZE <= len(rec); PHYSICALOFFSET == at;
// BODYLENGTH, TOPICLENGTH and PROPERTIESLENGTH add up to TOTALSIZE; and, if
// checkCRC, BODYCRC matches the body. The zero-TOTALSIZE and blank-record
// cases are the commitlog's envelope; here they are malformed records.
//
// Errors wrap ErrMalformed or ErrCRC. Validate does not allocate when the
// record is valid. INVARIANT: Validate(rec, at, c) == nil implies Decode(rec)
// and ReadDispatchInfo(rec) succeed.
func Validate(rec []byte, at int64, checkCRC bool) error {
	rec, s, err := parseAt(rec, at)
	if err != nil {
		return err
	}
	if checkCRC {
		stored := getI32(rec, OffBodyCRC)
		if got := BodyCRC(rec[s.body:s.bodyEnd]); got != stored {
			return fmt.Errorf("%w: BODYCRC 0x%08X, body has 0x%08X", ErrCRC, uint32(stored), uint32(got))
		}
		// NB: BODYCRC covers the body only. A power loss that kept a
		// record's start but zeroed its end (the properties) leaves a NUL
		// as its last byte, which no stored record has (CheckLimits).
		if s.props < s.end && rec[s.end-1] == 0 {
			return fmt.Errorf("%w: the properties end with a NUL byte (a torn write)", ErrMalformed)
		}
		if bytes.IndexByte(rec[s.topic:s.topicEnd], 0) >= 0 {
			return fmt.Errorf("%w: the topic has a NUL byte (a torn write)", ErrMalformed)
		}
	}
	return nil
}

// DispatchInfo is what the dispatcher needs from a record to build consume
// queue and key index entries. The byte slices alias the record.
type DispatchInfo struct {
	Topic          []byte
	QueueID        int32
	QueueOffset    int64
	PhysicalOffset int64
	Size           int32
	SysFlag        int32
	StoreTimestamp int64
	// TagsCode is the Java String.hashCode of TAGS, 0 without tags.
	// NB: for SCHEDULE_TOPIC_XXXX the consume queue stores the delivery time
	// instead; the dispatcher computes it from StoreTimestamp and DelayLevel.
	TagsCode   int64
	Keys       []byte // raw KEYS value, space-separated keys; nil if absent
	UniqKey    []byte // UNIQ_KEY value; nil if absent
	DelayLevel int32  // DELAY value; 0 if absent or not a decimal int32
	RealTopic  []byte // REAL_TOPIC value; nil if absent
	// Properties is the whole properties string (SQL92 filters read it).
	Properties []byte
}

// ReadDispatchInfo reads the DispatchInfo of the record at the start of rec.
// It checks the structure as Decode does, skips the body and scans the
// properties once. It does not check PHYSICALOFFSET or BODYCRC and does not
// allocate.
func ReadDispatchInfo(rec []byte) (DispatchInfo, error) {
	rec, s, err := parse(rec)
	if err != nil {
		return DispatchInfo{}, err
	}
	return dispatchInfo(rec, s), nil
}

// ValidateDispatchInfo is Validate(rec, at, false) and ReadDispatchInfo in
// one pass over the record's structure: the same checks, in the same
// order, with the same errors (TestValidateDispatchInfo).
func ValidateDispatchInfo(rec []byte, at int64) (DispatchInfo, error) {
	rec, s, err := parseAt(rec, at)
	if err != nil {
		return DispatchInfo{}, err
	}
	return dispatchInfo(rec, s), nil
}

// dispatchInfo reads the DispatchInfo of rec, whose structure s is.
func dispatchInfo(rec []byte, s span) DispatchInfo {
	d := DispatchInfo{
		Topic:          rec[s.topic:s.topicEnd:s.topicEnd],
		QueueID:        getI32(rec, OffQueueID),
		QueueOffset:    getI64(rec, OffQueueOffset),
		PhysicalOffset: getI64(rec, OffPhysicalOffset),
		Size:           int32(s.end),
		SysFlag:        s.sysFlag,
		StoreTimestamp: getI64(rec, s.f.storeTimestamp),
	}
	props := rec[s.props:s.end:s.end]
	d.Properties = props
	var tags, delay []byte
	for i := 0; i < len(props); {
		name, value, next, ok := nextProperty(props, i)
		if !ok {
			break
		}
		i = next
		switch {
		case equal(name, PropTags):
			tags = value
		case equal(name, PropKeys):
			d.Keys = value
		case equal(name, PropUniqKey):
			d.UniqKey = value
		case equal(name, PropDelay):
			delay = value
		case equal(name, PropRealTopic):
			d.RealTopic = value
		}
	}
	d.TagsCode = int64(javaHash(0, tags))
	d.DelayLevel = parseInt32(delay)
	return d
}

// parseInt32 parses an optionally signed decimal int32, returning 0 for
// anything else. It does not allocate.
func parseInt32(b []byte) int32 {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 10 {
		return 0
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if n < -1<<31 || n > 1<<31-1 {
		return 0
	}
	return int32(n)
}
