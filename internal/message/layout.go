package message

import "encoding/binary"

// Magic codes (spec §6.1). They are Java ints, so they are declared as int32
// and compared with the signed value read from the record.
const (
	// MagicV1 (0xDAA320A7) marks a v1 message record, the only version Sluice
	// writes and reads.
	MagicV1 int32 = -626843481
	// MagicV2 (0xDAA320AB) marks a 5.x record with a 2-byte topic length. It
	// is recognised only to give a clear error.
	MagicV2 int32 = -626843477
	// MagicBlank (0xCBD43194) marks the filler at the end of a commitlog
	// segment. It belongs to the commitlog envelope, not to this package.
	MagicBlank int32 = -875286124
)

// Field offsets of a v1 record. Fields up to and including BORNHOST are at
// fixed offsets; the ones after it move by 12 bytes for each IPv6 host, and
// the Off*V4 constants give their offsets when both hosts are IPv4.
const (
	OffTotalSize      = 0
	OffMagic          = 4
	OffBodyCRC        = 8
	OffQueueID        = 12
	OffFlag           = 16
	OffQueueOffset    = 20
	OffPhysicalOffset = 28
	OffSysFlag        = 36
	OffBornTimestamp  = 40
	OffBornHost       = 48

	OffStoreTimestampV4 = 56
	OffStoreHostV4      = 64
	OffReconsumeTimesV4 = 72
	OffPreparedTxV4     = 76
	OffBodyLengthV4     = 84
	OffBodyV4           = 88
)

// Field sizes of a v1 record.
const (
	LenInt32      = 4
	LenInt64      = 8
	LenHostV4     = 4 + 4  // address + int32 port
	LenHostV6     = 16 + 4 // address + int32 port
	LenTopicLen   = 1      // v1 topic length is one (signed) byte
	LenPropsLen   = 2      // int16
	LenBodyLength = 4      // int32
)

// Record size limits.
const (
	// MinRecordSize is the size of a v1 record with IPv4 hosts and an empty
	// body, topic and properties.
	MinRecordSize = OffBodyV4 + LenTopicLen + LenPropsLen // 91
	// MaxTopicLen is the longest topic a v1 record can hold.
	MaxTopicLen = 127
	// MaxPropertiesLen is the longest properties string (int16 length).
	MaxPropertiesLen = 32767
	// DefaultMaxBodySize is RocketMQ's default maxMessageSize (4 MiB).
	DefaultMaxBodySize = 4 << 20
	// MaxRecordSize is the largest TOTALSIZE the int32 field can express.
	MaxRecordSize = 1<<31 - 1
)

// SysFlag bits (spec §6.3).
const (
	FlagCompressed int32 = 0x1
	FlagMultiTags  int32 = 0x2

	TxMask     int32 = 0xC
	TxNot      int32 = 0x0
	TxPrepared int32 = 0x4
	TxCommit   int32 = 0x8
	TxRollback int32 = 0xC

	FlagBornHostV6  int32 = 0x10
	FlagStoreHostV6 int32 = 0x20
	FlagNeedUnwrap  int32 = 0x40 // 5.x only
	FlagInnerBatch  int32 = 0x80 // 5.x only

	// CompressionMask selects the compression algorithm when FlagCompressed
	// is set. 0 (older senders, the Go producer) and CompressionZlib both mean
	// zlib.
	CompressionMask int32 = 0x700
	CompressionLZ4  int32 = 0x100
	CompressionZstd int32 = 0x200
	CompressionZlib int32 = 0x300
)

// TxType returns the transaction type bits of sysFlag: TxNot, TxPrepared,
// TxCommit or TxRollback.
func TxType(sysFlag int32) int32 { return sysFlag & TxMask }

// Batch item layout (spec §6.6): TOTALSIZE, MAGICCODE, BODYCRC, FLAG,
// BODYLENGTH, body, PROPERTIESLENGTH, properties.
const (
	batchOffFlag    = 12
	batchOffBodyLen = 16
	batchOffBody    = 20
	// BatchItemOverhead is the size of a batch item with an empty body and no
	// properties.
	BatchItemOverhead = batchOffBody + LenPropsLen // 22
)

// Properties string separators (spec §6.4).
const (
	NameValueSeparator = '\x01'
	PropertySeparator  = '\x02'
)

// Property names (spec §6.5).
const (
	PropUniqKey                 = "UNIQ_KEY"
	PropKeys                    = "KEYS"
	PropTags                    = "TAGS"
	PropWait                    = "WAIT"
	PropDelay                   = "DELAY"
	PropRealTopic               = "REAL_TOPIC"
	PropRealQueueID             = "REAL_QID"
	PropRetryTopic              = "RETRY_TOPIC"
	PropOriginMessageID         = "ORIGIN_MESSAGE_ID"
	PropReconsumeTime           = "RECONSUME_TIME"
	PropMaxReconsumeTimes       = "MAX_RECONSUME_TIMES"
	PropTranMsg                 = "TRAN_MSG"
	PropProducerGroup           = "PGROUP"
	PropTransactionID           = "__transactionId__"
	PropTranPreparedQueueOffset = "TRAN_PREPARED_QUEUE_OFFSET"
	PropTransactionCheckTimes   = "TRANSACTION_CHECK_TIMES"
	PropCheckImmunityTime       = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropMinOffset               = "MIN_OFFSET"
	PropMaxOffset               = "MAX_OFFSET"
	PropConsumeStartTime        = "CONSUME_START_TIME"
	PropCluster                 = "CLUSTER"
	PropMsgRegion               = "MSG_REGION"
	PropTraceSwitch             = "TRACE_ON"
	PropShardingKey             = "SHARDING_KEY"
	PropBuyerID                 = "BUYER_ID"
	PropTransferFlag            = "TRANSFER_FLAG"
	PropCorrectionFlag          = "CORRECTION_FLAG"
	PropMQ2Flag                 = "MQ2_FLAG"
	PropInstanceID              = "INSTANCE_ID"
	PropCorrelationID           = "CORRELATION_ID"
	PropReplyToClient           = "REPLY_TO_CLIENT"
	PropTTL                     = "TTL"
	PropArriveTime              = "ARRIVE_TIME"
	PropMsgType                 = "MSG_TYPE"
	PropPushReplyTime           = "PUSH_REPLY_TIME"
	PropTimerDeliverMS          = "TIMER_DELIVER_MS" // 5.x timer; an ordinary property for 4.x
)

// hostLen returns the encoded size of a host whose IPv6 bit is flag.
func hostLen(sysFlag, flag int32) int {
	if sysFlag&flag != 0 {
		return LenHostV6
	}
	return LenHostV4
}

// fields holds the positions of the fields that move with the host families,
// computed from SYSFLAG.
type fields struct {
	bornHost, bornHostLen   int
	storeTimestamp          int
	storeHost, storeHostLen int
	reconsumeTimes          int
	preparedTx              int
	bodyLength              int // offset of BODYLENGTH; the body follows
}

func layoutFor(sysFlag int32) fields {
	var f fields
	f.bornHost = OffBornHost
	f.bornHostLen = hostLen(sysFlag, FlagBornHostV6)
	f.storeTimestamp = f.bornHost + f.bornHostLen
	f.storeHost = f.storeTimestamp + LenInt64
	f.storeHostLen = hostLen(sysFlag, FlagStoreHostV6)
	f.reconsumeTimes = f.storeHost + f.storeHostLen
	f.preparedTx = f.reconsumeTimes + LenInt32
	f.bodyLength = f.preparedTx + LenInt64
	return f
}

// minSize is the size of a record with these host families and empty body,
// topic and properties.
func (f fields) minSize() int { return f.bodyLength + LenBodyLength + LenTopicLen + LenPropsLen }

func getI32(b []byte, off int) int32 { return int32(binary.BigEndian.Uint32(b[off:])) }
func getI64(b []byte, off int) int64 { return int64(binary.BigEndian.Uint64(b[off:])) }
func getI16(b []byte, off int) int16 { return int16(binary.BigEndian.Uint16(b[off:])) }

func putI32(b []byte, off int, v int32) { binary.BigEndian.PutUint32(b[off:], uint32(v)) }
func putI64(b []byte, off int, v int64) { binary.BigEndian.PutUint64(b[off:], uint64(v)) }
func putI16(b []byte, off int, v int16) { binary.BigEndian.PutUint16(b[off:], uint16(v)) }
