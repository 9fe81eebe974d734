package store

import "errors"

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("store: closed")

// ErrLocked is returned by Open when another process holds the store.
var ErrLocked = errors.New("store: directory locked by another process")

// PutStatus is the outcome of a put (RocketMQ's PutMessageStatus).
type PutStatus int

const (
	PutOK PutStatus = iota
	// PutFlushDiskTimeout: stored, but the fsync did not complete within
	// the sync flush timeout (response code 10; the client counts it sent).
	PutFlushDiskTimeout
	// PutMessageIllegal: the message breaks a limit (code 13).
	PutMessageIllegal
	// PutServiceNotAvailable: the store cannot write: disk full, write
	// failure, closing (code 14).
	PutServiceNotAvailable
	// PutFlushSlaveTimeout: stored (SYNC_MASTER), but no slave confirmed
	// it within the replication timeout (code 12; stored all the same).
	PutFlushSlaveTimeout
	// PutSlaveNotAvailable: stored (SYNC_MASTER), but no slave was
	// connected and caught up to copy it (code 11; stored all the same).
	PutSlaveNotAvailable
	// PutInSyncReplicasNotEnough: stored (controller mode), but the
	// SyncStateSet holds fewer replicas than ha.min_in_sync_replicas.
	PutInSyncReplicasNotEnough
)

func (s PutStatus) String() string {
	switch s {
	case PutOK:
		return "PUT_OK"
	case PutFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case PutMessageIllegal:
		return "MESSAGE_ILLEGAL"
	case PutServiceNotAvailable:
		return "SERVICE_NOT_AVAILABLE"
	case PutFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case PutSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	case PutInSyncReplicasNotEnough:
		return "IN_SYNC_REPLICAS_NOT_ENOUGH"
	}
	return "UNKNOWN"
}

// GetStatus is the outcome of a get (RocketMQ's GetMessageStatus).
type GetStatus int

const (
	GetFound GetStatus = iota
	// GetNoMatchedMessage: entries were scanned, none passed the filter.
	GetNoMatchedMessage
	// GetOffsetOverflowOne: offset == max: no new message.
	GetOffsetOverflowOne
	// GetOffsetOverflowBadly: offset > max.
	GetOffsetOverflowBadly
	// GetOffsetTooSmall: offset < min.
	GetOffsetTooSmall
	// GetNoMessageInQueue: the queue exists but is empty.
	GetNoMessageInQueue
	// GetNoMatchedLogicQueue: no such queue.
	GetNoMatchedLogicQueue
	// GetMessageWasRemoving: the entries point at deleted commitlog data.
	GetMessageWasRemoving
)

func (s GetStatus) String() string {
	switch s {
	case GetFound:
		return "FOUND"
	case GetNoMatchedMessage:
		return "NO_MATCHED_MESSAGE"
	case GetOffsetOverflowOne:
		return "OFFSET_OVERFLOW_ONE"
	case GetOffsetOverflowBadly:
		return "OFFSET_OVERFLOW_BADLY"
	case GetOffsetTooSmall:
		return "OFFSET_TOO_SMALL"
	case GetNoMessageInQueue:
		return "NO_MESSAGE_IN_QUEUE"
	case GetNoMatchedLogicQueue:
		return "NO_MATCHED_LOGIC_QUEUE"
	case GetMessageWasRemoving:
		return "MESSAGE_WAS_REMOVING"
	}
	return "UNKNOWN"
}
