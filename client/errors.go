package client

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/internal/protocol"
)

// Sentinel errors. Test them with errors.Is; returned errors wrap them with
// the topic, the address or the request that failed.
var (
	// ErrClosed is returned by every method of a Producer, PushConsumer,
	// PullConsumer or Admin after Close, and fails the calls Close cut short.
	ErrClosed = errors.New("client: closed")

	// ErrNotStarted is returned by methods that need Start first.
	ErrNotStarted = errors.New("client: not started")

	// ErrStarted is returned by Start on a client already started, and by
	// Subscribe after Start.
	ErrStarted = errors.New("client: already started")

	// ErrNoRoute means no name server knows a usable route for a topic
	// (no writable queue for a send, no readable queue for a pull), or no
	// name server could be reached.
	ErrNoRoute = errors.New("client: no route to topic")

	// ErrBusy means a broker answered SYSTEM_BUSY (2) to every attempt the
	// client made before its deadline. A *BrokerError with code 2 also
	// matches it.
	ErrBusy = errors.New("client: broker busy")

	// ErrInvalidMessage is returned before anything is sent for a message
	// the broker would refuse: empty topic or body, a body above the
	// maximum size, a batch mixing topics or carrying a delay.
	ErrInvalidMessage = errors.New("client: invalid message")

	// ErrInvalidOption is returned by the constructors for an option value
	// out of range (a name server address that is not ip:port, a
	// negative size, …).
	ErrInvalidOption = errors.New("client: invalid option")

	// ErrGroupInUse is returned by Start when this process already runs a
	// consumer of the same group under the same client id. Give each one
	// its own WithInstanceName.
	ErrGroupInUse = errors.New("client: consumer group already running with this client id")
)

// Code is a RocketMQ response code (spec §1.4).
type Code int16

// Response codes a client meets. The full table is RocketMQ's.
const (
	CodeSuccess              Code = protocol.Success
	CodeSystemError          Code = protocol.SystemError
	CodeSystemBusy           Code = protocol.SystemBusy
	CodeRequestNotSupported  Code = protocol.RequestCodeNotSupported
	CodeFlushDiskTimeout     Code = protocol.FlushDiskTimeout
	CodeSlaveNotAvailable    Code = protocol.SlaveNotAvailable
	CodeFlushSlaveTimeout    Code = protocol.FlushSlaveTimeout
	CodeMessageIllegal       Code = protocol.MessageIllegal
	CodeServiceNotAvailable  Code = protocol.ServiceNotAvailable
	CodeVersionNotSupported  Code = protocol.VersionNotSupported
	CodeNoPermission         Code = protocol.NoPermission
	CodeTopicNotExist        Code = protocol.TopicNotExist
	CodeTopicExistAlready    Code = protocol.TopicExistAlready
	CodePullNotFound         Code = protocol.PullNotFound
	CodePullRetryImmediate   Code = protocol.PullRetryImmediately
	CodePullOffsetMoved      Code = protocol.PullOffsetMoved
	CodeQueryNotFound        Code = protocol.QueryNotFound
	CodeSubscriptionNotExist Code = protocol.SubscriptionNotExist
	CodeFlowControl          Code = protocol.FlowControl
)

// String returns the RocketMQ name of c, e.g. "SYSTEM_BUSY".
func (c Code) String() string { return protocol.ResponseCodeName(int16(c)) }

// Errors for common broker answers, to use with errors.Is. They match any
// *BrokerError with the same code, whatever its address and remark.
var (
	ErrTopicNotExist       error = &BrokerError{Code: CodeTopicNotExist}
	ErrNoPermission        error = &BrokerError{Code: CodeNoPermission}
	ErrMessageIllegal      error = &BrokerError{Code: CodeMessageIllegal}
	ErrServiceNotAvailable error = &BrokerError{Code: CodeServiceNotAvailable}
)

// BrokerError is a failed answer from a broker or name server: the
// response code, the server's remark (what happened, what to do) and the
// server's address.
//
// errors.Is(err, &BrokerError{Code: c}) matches any BrokerError with code
// c; a SYSTEM_BUSY answer also matches ErrBusy and a TOPIC_NOT_EXIST answer
// ErrNoRoute.
type BrokerError struct {
	Code    Code
	Remark  string
	Addr    string // the server that answered
	Request string // the request's RocketMQ name, e.g. "SEND_MESSAGE_V2"
}

func (e *BrokerError) Error() string {
	s := "client: " + e.Code.String()
	if e.Request != "" {
		s += " for " + e.Request
	}
	if e.Addr != "" {
		s += " from " + e.Addr
	}
	if e.Remark != "" {
		s += ": " + e.Remark
	}
	return s
}

// Is matches a *BrokerError target with the same code, ErrBusy for
// SYSTEM_BUSY and ErrNoRoute for TOPIC_NOT_EXIST.
func (e *BrokerError) Is(target error) bool {
	switch target {
	case ErrBusy:
		return e.Code == CodeSystemBusy
	case ErrNoRoute:
		return e.Code == CodeTopicNotExist
	}
	if t, ok := target.(*BrokerError); ok {
		return t.Code == e.Code
	}
	return false
}

// newBrokerError returns the error of a failed response to request code
// req from addr.
func newBrokerError(addr string, req int16, code int16, remark string) *BrokerError {
	return &BrokerError{Code: Code(code), Remark: remark, Addr: addr, Request: protocol.CodeName(req)}
}

// invalidMessage wraps ErrInvalidMessage with a reason.
func invalidMessage(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidMessage, fmt.Sprintf(format, args...))
}

// invalidOption wraps ErrInvalidOption with a reason.
func invalidOption(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, args...))
}
