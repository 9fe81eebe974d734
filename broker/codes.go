package broker

import (
	"errors"

	"github.com/sluicemq/sluice/broker/store"
	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// This file is the one table from store results and errors to wire codes
// (spec 3.1, 3.2): every handler answers a put, a get or a store error
// through it.

// putKind says who asked for a put, which decides how a stored-but-slow
// put is answered.
type putKind int

const (
	// putSend: a producer's send. Stored but not flushed in time is
	// FLUSH_DISK_TIMEOUT (10): the client counts it sent, as RocketMQ's.
	putSend putKind = iota
	// putInternal: the broker stores on a client's behalf (send-back,
	// end-transaction, delayed delivery). The message is stored: success.
	// Answering a failure would make the client ask again and store it
	// twice.
	putInternal
	// putSendBack: a consumer's send-back. Stored but not flushed in time
	// is SUCCESS, as putInternal; stored but not on the replicas is
	// SYSTEM_ERROR (Java's consumerSendMsgBack answers only PUT_OK with
	// SUCCESS): answered SUCCESS, the consumer moves on from the message,
	// and a failover that cuts the retry copy would lose it. The client
	// sends it back again (a retry stored twice, as at-least-once allows).
	putSendBack
)

// putCode maps a put result to a response code and remark.
func putCode(res store.PutResult, kind putKind) (int16, string) {
	switch res.Status {
	case store.PutOK:
		return protocol.Success, ""
	case store.PutFlushDiskTimeout, store.PutFlushSlaveTimeout, store.PutSlaveNotAvailable, store.PutInSyncReplicasNotEnough:
		switch {
		case kind == putInternal, kind == putSendBack && res.Status == store.PutFlushDiskTimeout:
			return protocol.Success, ""
		case kind == putSendBack:
			return protocol.SystemError, res.Status.String() + ": the retry copy is stored on the master but not on its replicas; " +
				"send the message back again: " + res.Remark
		}
		return storedButSlow[res.Status], res.Remark
	case store.PutMessageIllegal:
		return protocol.MessageIllegal, res.Remark
	case store.PutServiceNotAvailable:
		return protocol.ServiceNotAvailable, res.Remark
	}
	return protocol.SystemError, res.Status.String() + ": " + res.Remark
}

// storedButSlow are the send codes of a message stored but not known to
// be on disk or on a slave: clients count it sent (RocketMQ's).
var storedButSlow = map[store.PutStatus]int16{
	store.PutFlushDiskTimeout:  protocol.FlushDiskTimeout,
	store.PutFlushSlaveTimeout: protocol.FlushSlaveTimeout,
	store.PutSlaveNotAvailable: protocol.SlaveNotAvailable,
	// NB: RocketMQ 5 has no code of its own for it; the remark says.
	store.PutInSyncReplicasNotEnough: protocol.SlaveNotAvailable,
}

// replyPut answers a put the broker made on a client's behalf
// (putInternal: end-transaction; putSendBack).
func replyPut(w remoting.ResponseWriter, req *remoting.Command, res store.PutResult, kind putKind) {
	code, remark := putCode(res, kind)
	reply(w, req, code, remark)
}

// storeErrCode maps an error of a store read (a message by offset, a
// search) to a response code: a closing store is SERVICE_NOT_AVAILABLE
// (retry elsewhere), anything else SYSTEM_ERROR.
func storeErrCode(err error) int16 {
	switch {
	case errors.Is(err, store.ErrClosed), errors.Is(err, commitlog.ErrClosed):
		return protocol.ServiceNotAvailable
	}
	return protocol.SystemError
}

// pullCode maps a store result to a pull response code and nextBeginOffset
// (the table of spec 3.2).
func pullCode(res store.GetResult, offset int64) (int16, int64) {
	switch res.Status {
	case store.GetFound:
		return protocol.Success, res.NextOffset
	case store.GetNoMatchedMessage, store.GetMessageWasRemoving:
		return protocol.PullRetryImmediately, res.NextOffset
	case store.GetOffsetOverflowOne:
		return protocol.PullNotFound, offset
	case store.GetNoMessageInQueue, store.GetNoMatchedLogicQueue:
		if offset != 0 {
			return protocol.PullOffsetMoved, 0
		}
		return protocol.PullNotFound, 0
	case store.GetOffsetTooSmall, store.GetOffsetOverflowBadly:
		return protocol.PullOffsetMoved, res.NextOffset
	}
	return protocol.SystemError, offset
}
