package controller

import (
	"errors"
	"strconv"

	"github.com/sluicemq/sluice/internal/protocol"
)

var (
	// ErrClosed is returned by a closed Node or Client.
	ErrClosed = errors.New("controller: closed")
	// ErrNotLeader is returned by a write or read sent to a node that is not
	// the Raft leader.
	ErrNotLeader = errors.New("controller: not the leader")
	// ErrNoController is returned by a Client that reached no controller.
	ErrNoController = errors.New("controller: no controller answered")
)

// Error is a controller's refusal: its response code (a
// protocol.Controller* code or SYSTEM_ERROR) and remark.
type Error struct {
	Code   int16
	Remark string
}

func (e *Error) Error() string {
	return "controller: " + protocol.ResponseCodeName(e.Code) + " (" + strconv.Itoa(int(e.Code)) + "): " + e.Remark
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// fmtIDs renders ids as "[1 2 3]".
func fmtIDs(ids []int64) string {
	s := "["
	for i, id := range ids {
		if i > 0 {
			s += " "
		}
		s += itoa(id)
	}
	return s + "]"
}
