package protocol

// Transaction types carried in EndTransactionRequestHeader.CommitOrRollback
// (they are the message sysFlag transaction bits, spec §6.3).
const (
	TransactionNotType      = 0  // unknown / no decision: the broker ignores it
	TransactionPreparedType = 4  // half message
	TransactionCommitType   = 8  // commit
	TransactionRollbackType = 12 // rollback
)

// EndTransactionRequestHeader is the header of END_TRANSACTION (37),
// spec §3.9. The remark carries the local transaction's error text.
type EndTransactionRequestHeader struct {
	ProducerGroup        string // producerGroup
	TranStateTableOffset int64  // tranStateTableOffset: half-queue offset
	CommitLogOffset      int64  // commitLogOffset: physical offset of the half message
	CommitOrRollback     int32  // commitOrRollback: Transaction*Type
	FromTransactionCheck bool   // fromTransactionCheck, optional
	MsgID                string // msgId (UNIQ_KEY)
	TransactionID        string // transactionId, optional
	BrokerName           string // bname, optional
}

// ToExt implements ExtHeader.
func (h *EndTransactionRequestHeader) ToExt(ext map[string]string) {
	ext["producerGroup"] = h.ProducerGroup
	ext["tranStateTableOffset"] = itoa64(h.TranStateTableOffset)
	ext["commitLogOffset"] = itoa64(h.CommitLogOffset)
	ext["commitOrRollback"] = itoa32(h.CommitOrRollback)
	ext["fromTransactionCheck"] = btoa(h.FromTransactionCheck)
	ext["msgId"] = h.MsgID
	ext["transactionId"] = h.TransactionID
	putOpt(ext, "bname", h.BrokerName)
}

// FromExt implements ExtHeader.
func (h *EndTransactionRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "EndTransactionRequestHeader", ext: ext}
	*h = EndTransactionRequestHeader{
		ProducerGroup:        r.str("producerGroup"),
		TranStateTableOffset: r.int64("tranStateTableOffset"),
		CommitLogOffset:      r.int64("commitLogOffset"),
		CommitOrRollback:     r.int32("commitOrRollback"),
		FromTransactionCheck: r.optBool("fromTransactionCheck"),
		MsgID:                r.str("msgId"),
		TransactionID:        r.optStr("transactionId"),
		BrokerName:           r.optStr("bname"),
	}
	return r.err
}

// CheckTransactionStateRequestHeader is the header of
// CHECK_TRANSACTION_STATE (39), broker → producer, spec §3.9. The body is
// the half message in the stored layout.
type CheckTransactionStateRequestHeader struct {
	TranStateTableOffset int64  // tranStateTableOffset
	CommitLogOffset      int64  // commitLogOffset
	MsgID                string // msgId (UNIQ_KEY), optional
	TransactionID        string // transactionId (UNIQ_KEY), optional
	OffsetMsgID          string // offsetMsgId, optional
}

// ToExt implements ExtHeader.
func (h *CheckTransactionStateRequestHeader) ToExt(ext map[string]string) {
	ext["tranStateTableOffset"] = itoa64(h.TranStateTableOffset)
	ext["commitLogOffset"] = itoa64(h.CommitLogOffset)
	putOpt(ext, "msgId", h.MsgID)
	putOpt(ext, "transactionId", h.TransactionID)
	putOpt(ext, "offsetMsgId", h.OffsetMsgID)
}

// FromExt implements ExtHeader.
func (h *CheckTransactionStateRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "CheckTransactionStateRequestHeader", ext: ext}
	*h = CheckTransactionStateRequestHeader{
		TranStateTableOffset: r.int64("tranStateTableOffset"),
		CommitLogOffset:      r.int64("commitLogOffset"),
		MsgID:                r.optStr("msgId"),
		TransactionID:        r.optStr("transactionId"),
		OffsetMsgID:          r.optStr("offsetMsgId"),
	}
	return r.err
}
