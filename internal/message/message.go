package message

import (
	"fmt"
	"hash/crc32"
	"net/netip"
)

// Message is what a producer sends, before the broker stores it. The broker
// fills StoreTimestamp and StoreHost and then encodes it with Encode.
type Message struct {
	Topic   string
	QueueID int32
	Flag    int32
	// SysFlag as sent by the producer. Encode derives the host family bits
	// (FlagBornHostV6, FlagStoreHostV6) from BornHost and StoreHost and
	// ignores them here.
	SysFlag        int32
	BornTimestamp  int64 // ms
	BornHost       netip.AddrPort
	StoreTimestamp int64 // ms
	StoreHost      netip.AddrPort
	ReconsumeTimes int32
	// PreparedTransactionOffset is 0 except for END_TRANSACTION results.
	PreparedTransactionOffset int64
	Body                      []byte // stored as is (compressed if FlagCompressed)
	Properties                string // raw properties string (name\x01value\x02...)
}

// StoredSysFlag returns the SYSFLAG Encode writes: m.SysFlag with the host
// family bits set from BornHost and StoreHost.
func (m *Message) StoredSysFlag() int32 {
	f := m.SysFlag &^ (FlagBornHostV6 | FlagStoreHostV6)
	if isV6(m.BornHost) {
		f |= FlagBornHostV6
	}
	if isV6(m.StoreHost) {
		f |= FlagStoreHostV6
	}
	return f
}

// EncodedSize returns the TOTALSIZE of the record Encode writes:
// 91 + body + topic + properties, plus 12 per IPv6 host.
func (m *Message) EncodedSize() int { return m.encodedSize(layoutFor(m.StoredSysFlag())) }

func (m *Message) encodedSize(f fields) int {
	return f.minSize() + len(m.Body) + len(m.Topic) + len(m.Properties)
}

// CheckLimits reports whether m can be stored: a topic of 1..MaxTopicLen
// bytes, at most MaxPropertiesLen bytes of properties, a body of at most
// maxBody bytes (DefaultMaxBodySize when maxBody <= 0), valid hosts, and
// properties that do not end with a NUL byte (so that recovery can tell a
// record whose end a power loss zeroed; see Validate). The errors wrap
// ErrTopicEmpty, ErrTopicTooLong, ErrPropertiesTooLong, ErrPropertiesNUL,
// ErrBodyTooLarge, ErrRecordTooLarge or ErrInvalidHost and state the limit.
//
// NB: CheckLimits does not validate topic characters or other property
// contents; that is the broker's policy.
func (m *Message) CheckLimits(maxBody int) error {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodySize
	}
	if len(m.Body) > maxBody {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, len(m.Body), maxBody)
	}
	if n := len(m.Properties); n > 0 && m.Properties[n-1] == 0 {
		return fmt.Errorf("%w (a property value may not end with one)", ErrPropertiesNUL)
	}
	return m.checkEncodable()
}

// checkEncodable checks what the v1 layout itself can represent.
func (m *Message) checkEncodable() error { return m.checkEncodableSize(m.EncodedSize()) }

// checkEncodableSize is checkEncodable for a message of EncodedSize size.
func (m *Message) checkEncodableSize(size int) error {
	switch {
	case len(m.Topic) == 0:
		return ErrTopicEmpty
	case len(m.Topic) > MaxTopicLen:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTopicTooLong, len(m.Topic), MaxTopicLen)
	case len(m.Properties) > MaxPropertiesLen:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrPropertiesTooLong, len(m.Properties), MaxPropertiesLen)
	case !m.BornHost.Addr().IsValid():
		return fmt.Errorf("%w: born host %v", ErrInvalidHost, m.BornHost)
	case !m.StoreHost.Addr().IsValid():
		return fmt.Errorf("%w: store host %v", ErrInvalidHost, m.StoreHost)
	}
	// NB: compare as int64 so the check also holds where int is 32 bits.
	if int64(size) > MaxRecordSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrRecordTooLarge, int64(size), int64(MaxRecordSize))
	}
	return nil
}

// Encode writes m as a v1 record into dst, which must be exactly
// EncodedSize() bytes long, with the given queue offset and physical offset
// (the record's position in the commitlog). It computes BODYCRC and writes
// every byte of dst, so dst may hold stale data. Encode does not allocate and
// does not retain dst; it fails only when the limits of the layout are
// exceeded (see CheckLimits, without the body policy) or len(dst) is wrong.
//
// An IPv4-mapped IPv6 host (::ffff:a.b.c.d, as a dual-stack socket reports
// IPv4 peers) is stored as IPv4, as Java does. IPv6 zones are dropped.
func (m *Message) Encode(dst []byte, queueOffset, physOffset int64) error {
	sysFlag := m.StoredSysFlag()
	f := layoutFor(sysFlag)
	size := m.encodedSize(f)
	if err := m.checkEncodableSize(size); err != nil {
		return err
	}
	if len(dst) != size {
		return fmt.Errorf("%w: len(dst) %d, record needs %d", ErrBufferSize, len(dst), size)
	}

	putI32(dst, OffTotalSize, int32(size))
	putI32(dst, OffMagic, MagicV1)
	putI32(dst, OffBodyCRC, BodyCRC(m.Body))
	putI32(dst, OffQueueID, m.QueueID)
	putI32(dst, OffFlag, m.Flag)
	putI64(dst, OffQueueOffset, queueOffset)
	putI64(dst, OffPhysicalOffset, physOffset)
	putI32(dst, OffSysFlag, sysFlag)
	putI64(dst, OffBornTimestamp, m.BornTimestamp)
	putHost(dst[f.bornHost:f.bornHost+f.bornHostLen], m.BornHost)
	putI64(dst, f.storeTimestamp, m.StoreTimestamp)
	putHost(dst[f.storeHost:f.storeHost+f.storeHostLen], m.StoreHost)
	putI32(dst, f.reconsumeTimes, m.ReconsumeTimes)
	putI64(dst, f.preparedTx, m.PreparedTransactionOffset)

	p := f.bodyLength
	putI32(dst, p, int32(len(m.Body)))
	p += LenBodyLength
	p += copy(dst[p:], m.Body)
	dst[p] = byte(len(m.Topic))
	p += LenTopicLen
	p += copy(dst[p:], m.Topic)
	putI16(dst, p, int16(len(m.Properties)))
	p += LenPropsLen
	copy(dst[p:], m.Properties)
	return nil
}

// BodyCRC returns the BODYCRC of body: CRC32 (IEEE) masked with 0x7FFFFFFF
// (spec §6.2).
func BodyCRC(body []byte) int32 {
	return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF)
}

// isV6 reports whether ap is stored as a 20-byte IPv6 host.
func isV6(ap netip.AddrPort) bool {
	return ap.Addr().Unmap().Is6()
}

// putHost writes ap into dst (8 or 20 bytes, as isV6 decided). An invalid
// address is written as zeros.
func putHost(dst []byte, ap netip.AddrPort) {
	a := ap.Addr().Unmap()
	if len(dst) == LenHostV4 {
		var ip [4]byte
		if a.Is4() {
			ip = a.As4()
		}
		copy(dst, ip[:])
	} else {
		ip := a.As16()
		copy(dst, ip[:])
	}
	putI32(dst, len(dst)-LenInt32, int32(ap.Port()))
}

// readHost reads an 8- or 20-byte host. The port is an int32 on disk and
// must fit in 0..65535.
func readHost(src []byte) (netip.AddrPort, bool) {
	port := getI32(src, len(src)-LenInt32)
	if port < 0 || port > 0xFFFF {
		return netip.AddrPort{}, false
	}
	var a netip.Addr
	if len(src) == LenHostV4 {
		a = netip.AddrFrom4([4]byte(src[:4]))
	} else {
		a = netip.AddrFrom16([16]byte(src[:16]))
	}
	return netip.AddrPortFrom(a, uint16(port)), true
}
