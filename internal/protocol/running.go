package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Property names of ConsumerRunningInfo.Properties that RocketMQ's tools
// read (Java's ConsumerRunningInfo constants).
const (
	PropNameServerAddr         = "PROP_NAMESERVER_ADDR"
	PropThreadPoolCoreSize     = "PROP_THREADPOOL_CORE_SIZE"
	PropConsumeOrderly         = "PROP_CONSUMEORDERLY"
	PropConsumeType            = "PROP_CONSUME_TYPE"
	PropClientVersion          = "PROP_CLIENT_VERSION"
	PropConsumerStartTimestamp = "PROP_CONSUMER_START_TIMESTAMP"
)

// ProcessQueueInfo is one queue's entry in ConsumerRunningInfo.MQTable:
// what the client holds of the queue. Sizes are whole MiB, as in Java.
type ProcessQueueInfo struct {
	CommitOffset            int64 `json:"commitOffset"`
	CachedMsgMinOffset      int64 `json:"cachedMsgMinOffset"`
	CachedMsgMaxOffset      int64 `json:"cachedMsgMaxOffset"`
	CachedMsgCount          int   `json:"cachedMsgCount"`
	CachedMsgSizeInMiB      int64 `json:"cachedMsgSizeInMiB"`
	TransactionMsgMinOffset int64 `json:"transactionMsgMinOffset"`
	TransactionMsgMaxOffset int64 `json:"transactionMsgMaxOffset"`
	TransactionMsgCount     int   `json:"transactionMsgCount"`
	Locked                  bool  `json:"locked"`
	TryUnlockTimes          int64 `json:"tryUnlockTimes"`
	LastLockTimestamp       int64 `json:"lastLockTimestamp"`
	Dropped                 bool  `json:"dropped"`
	LastPullTimestamp       int64 `json:"lastPullTimestamp"`
	LastConsumeTimestamp    int64 `json:"lastConsumeTimestamp"`
}

// ConsumeStatus is one topic's entry in ConsumerRunningInfo.StatusTable:
// rates per second and mean times in milliseconds over the last minute,
// and the failures of the last hour.
type ConsumeStatus struct {
	PullRT            float64 `json:"pullRT"`
	PullTPS           float64 `json:"pullTPS"`
	ConsumeRT         float64 `json:"consumeRT"`
	ConsumeOKTPS      float64 `json:"consumeOKTPS"`
	ConsumeFailedTPS  float64 `json:"consumeFailedTPS"`
	ConsumeFailedMsgs int64   `json:"consumeFailedMsgs"`
}

// ConsumerRunningInfo is the body a client answers
// GET_CONSUMER_RUNNING_INFO (307) with: its settings, subscriptions,
// queues and rates, and optionally its goroutine stacks.
//
// NB: like ResetOffsetBody its mqTable is keyed by MessageQueue objects.
// Java writes it with fastjson (object keys, not JSON) and so does the
// official Go client, so Encode writes that form and
// DecodeConsumerRunningInfo reads it; encoding/json can do neither.
type ConsumerRunningInfo struct {
	Properties      map[string]string
	SubscriptionSet []SubscriptionData
	MQTable         map[MessageQueue]ProcessQueueInfo
	StatusTable     map[string]ConsumeStatus
	JStack          string
}

// Encode writes the running info in the fastjson form, queues sorted.
func (r ConsumerRunningInfo) Encode() ([]byte, error) {
	var out bytes.Buffer
	field := func(name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("protocol: running info %s: %w", name, err)
		}
		out.WriteString(strconv.Quote(name))
		out.WriteByte(':')
		out.Write(b)
		out.WriteByte(',')
		return nil
	}
	props, subs, status := r.Properties, r.SubscriptionSet, r.StatusTable
	if props == nil {
		props = map[string]string{}
	}
	if subs == nil {
		subs = []SubscriptionData{}
	}
	if status == nil {
		status = map[string]ConsumeStatus{}
	}
	out.WriteByte('{')
	if err := errors.Join(field("properties", props), field("subscriptionSet", subs),
		field("statusTable", status), field("jstack", r.JStack)); err != nil {
		return nil, err
	}
	out.WriteString(`"mqTable":`)
	b, err := appendQueueKeyed(out.Bytes(), r.MQTable, func(b []byte, pq ProcessQueueInfo) ([]byte, error) {
		v, err := json.Marshal(pq)
		return append(b, v...), err
	})
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// DecodeConsumerRunningInfo reads a running info body: the fastjson form
// Java and the Go clients write, whose mqTable has object keys, or plain
// JSON whose mqTable is absent or empty.
func DecodeConsumerRunningInfo(data []byte) (ConsumerRunningInfo, error) {
	var r ConsumerRunningInfo
	fields, err := topLevelFields(data)
	if err != nil {
		return r, fmt.Errorf("protocol: running info: %w", err)
	}
	for name, dst := range map[string]any{"properties": &r.Properties, "subscriptionSet": &r.SubscriptionSet,
		"statusTable": &r.StatusTable} {
		if v, ok := fields[name]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return r, fmt.Errorf("protocol: running info %s: %w", name, err)
			}
		}
	}
	if v, ok := fields["jstack"]; ok {
		if err := json.Unmarshal(v, &r.JStack); err != nil {
			// NB: the official Go client writes its stacks unescaped
			// (raw newlines and tabs): keep the text as it is.
			if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
				return r, fmt.Errorf("protocol: running info jstack: %w", err)
			}
			// Bytes that are not UTF-8 become U+FFFD, as json.Unmarshal
			// makes them, so that what Encode writes reads back the same.
			r.JStack = strings.ToValidUTF8(string(v[1:len(v)-1]), "\uFFFD")
		}
	}
	r.MQTable = map[MessageQueue]ProcessQueueInfo{}
	if v, ok := fields["mqTable"]; ok {
		err := objectKeyed(v, func(k, v []byte) error {
			var q MessageQueue
			var pq ProcessQueueInfo
			if err := json.Unmarshal(k, &q); err != nil {
				return fmt.Errorf("queue %s: %w", k, err)
			}
			if err := json.Unmarshal(v, &pq); err != nil {
				return fmt.Errorf("queue %s: %w", k, err)
			}
			r.MQTable[q] = pq
			return nil
		})
		if err != nil {
			return r, fmt.Errorf("protocol: running info mqTable: %w", err)
		}
	}
	return r, nil
}

// topLevelFields splits a JSON-like object into its fields' raw values.
// Values may be fastjson maps with object keys.
func topLevelFields(data []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := objectKeyed(data, func(k, v []byte) error {
		var name string
		if err := json.Unmarshal(k, &name); err != nil {
			return fmt.Errorf("field name %s: %w", k, err)
		}
		out[name] = v
		return nil
	})
	return out, err
}

// objectKeyed calls each for every key and value of the object in data,
// whose keys may be any JSON value (fastjson's maps keyed by objects).
func objectKeyed(data []byte, each func(k, v []byte) error) error {
	p := skipSpace(data, 0)
	if p >= len(data) || data[p] != '{' {
		return errors.New("not an object")
	}
	p = skipSpace(data, p+1)
	if p < len(data) && data[p] == '}' {
		return checkEnd(data, p+1)
	}
	for {
		kEnd, err := skipValue(data, p)
		if err != nil {
			return err
		}
		k := data[p:kEnd]
		p = skipSpace(data, kEnd)
		if p >= len(data) || data[p] != ':' {
			return fmt.Errorf("want ':' at byte %d", p)
		}
		p = skipSpace(data, p+1)
		vEnd, err := skipValue(data, p)
		if err != nil {
			return err
		}
		if err := each(k, data[p:vEnd]); err != nil {
			return err
		}
		p = skipSpace(data, vEnd)
		if p >= len(data) {
			return errors.New("unterminated object")
		}
		switch data[p] {
		case ',':
			p = skipSpace(data, p+1)
		case '}':
			return checkEnd(data, p+1)
		default:
			return fmt.Errorf("want ',' or '}' at byte %d", p)
		}
	}
}

func checkEnd(data []byte, p int) error {
	if skipSpace(data, p) != len(data) {
		return fmt.Errorf("trailing data at byte %d", p)
	}
	return nil
}

func skipSpace(data []byte, p int) int {
	for p < len(data) && (data[p] == ' ' || data[p] == '\t' || data[p] == '\r' || data[p] == '\n') {
		p++
	}
	return p
}

// skipValue returns the end of the value that starts at p: a string, an
// object or array (brackets matched outside strings), or a bare literal.
// It checks structure only; json.Unmarshal checks the value itself.
func skipValue(data []byte, p int) (int, error) {
	if p >= len(data) {
		return p, errors.New("unexpected end")
	}
	depth := 0
	for i := p; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end, err := skipString(data, i)
			if err != nil {
				return i, err
			}
			i = end - 1
			if depth == 0 {
				return end, nil
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				if i == p {
					return i, fmt.Errorf("unexpected %q at byte %d", c, i)
				}
				return i, nil // NB: the end of a bare literal
			}
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		case ',', ':', ' ', '\t', '\r', '\n':
			if depth == 0 {
				if i == p {
					return i, fmt.Errorf("unexpected %q at byte %d", c, i)
				}
				return i, nil
			}
		}
	}
	if depth != 0 {
		return len(data), errors.New("unterminated value")
	}
	return len(data), nil
}

// skipString returns the end of the string literal at data[p] == '"'.
func skipString(data []byte, p int) (int, error) {
	for i := p + 1; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return len(data), errors.New("unterminated string")
}

// ConsumeResultCode is how a handler took a message consumed directly
// (Java's CMResult). It is written as Java's enum name; the official Go
// client writes its number, which is read too.
type ConsumeResultCode int

const (
	CRSuccess ConsumeResultCode = iota
	CRLater
	CRRollback
	CRCommit
	CRThrowException
	CRReturnNull
)

var crNames = [...]string{"CR_SUCCESS", "CR_LATER", "CR_ROLLBACK", "CR_COMMIT", "CR_THROW_EXCEPTION", "CR_RETURN_NULL"}

func (c ConsumeResultCode) String() string {
	if c >= 0 && int(c) < len(crNames) {
		return crNames[c]
	}
	return "CR_" + strconv.Itoa(int(c))
}

// MarshalJSON writes the enum name.
func (c ConsumeResultCode) MarshalJSON() ([]byte, error) {
	if c < 0 || int(c) >= len(crNames) {
		return nil, fmt.Errorf("protocol: consume result %d", int(c))
	}
	return []byte(`"` + crNames[c] + `"`), nil
}

// UnmarshalJSON reads the enum name or its number.
func (c *ConsumeResultCode) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil && n >= 0 && n < len(crNames) {
		*c = ConsumeResultCode(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		for i, name := range crNames {
			if s == name {
				*c = ConsumeResultCode(i)
				return nil
			}
		}
	}
	return fmt.Errorf("protocol: consume result %s: want one of %v", b, crNames)
}

// ConsumeMessageDirectlyResult is the body a client answers
// CONSUME_MESSAGE_DIRECTLY (309) with.
type ConsumeMessageDirectlyResult struct {
	Order          bool              `json:"order"`
	AutoCommit     bool              `json:"autoCommit"`
	ConsumeResult  ConsumeResultCode `json:"consumeResult"`
	Remark         string            `json:"remark"`
	SpentTimeMills int64             `json:"spentTimeMills"`
}

// ConsumerStatusBody is the body a client answers
// GET_CONSUMER_STATUS_FROM_CLIENT (221) with: the offset it holds for
// each queue of the topic asked about. Like ConsumerRunningInfo's mqTable
// it is keyed by MessageQueue objects (fastjson form).
type ConsumerStatusBody struct {
	MessageQueueTable map[MessageQueue]int64
}

// Encode writes {"messageQueueTable":{{queue}:offset,...}}, sorted.
func (b ConsumerStatusBody) Encode() ([]byte, error) {
	out := []byte(`{"messageQueueTable":`)
	out, err := appendQueueOffsets(out, b.MessageQueueTable)
	if err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// DecodeConsumerStatusBody reads a ConsumerStatusBody.
func DecodeConsumerStatusBody(data []byte) (ConsumerStatusBody, error) {
	b := ConsumerStatusBody{MessageQueueTable: map[MessageQueue]int64{}}
	fields, err := topLevelFields(data)
	if err != nil {
		return b, fmt.Errorf("protocol: consumer status: %w", err)
	}
	if v, ok := fields["messageQueueTable"]; ok {
		if err := readQueueOffsets(v, b.MessageQueueTable); err != nil {
			return b, fmt.Errorf("protocol: consumer status messageQueueTable: %w", err)
		}
	}
	return b, nil
}

// GetConsumerStatusBody is the body a broker answers
// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) with: each client's queue
// offsets, by client id (Java's GetConsumerStatusBody).
type GetConsumerStatusBody struct {
	ConsumerTable map[string]map[MessageQueue]int64
}

// Encode writes {"messageQueueTable":{},"consumerTable":{"id":{{queue}:offset}}}.
func (b GetConsumerStatusBody) Encode() ([]byte, error) {
	out := []byte(`{"messageQueueTable":{},"consumerTable":{`)
	ids := make([]string, 0, len(b.ConsumerTable))
	for id := range b.ConsumerTable {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		k, err := json.Marshal(id) // NB: not strconv.Quote, whose \x escapes are not JSON
		if err != nil {
			return nil, err
		}
		out = append(out, k...)
		out = append(out, ':')
		if out, err = appendQueueOffsets(out, b.ConsumerTable[id]); err != nil {
			return nil, err
		}
	}
	return append(out, "}}"...), nil
}

// DecodeGetConsumerStatusBody reads a GetConsumerStatusBody.
func DecodeGetConsumerStatusBody(data []byte) (GetConsumerStatusBody, error) {
	b := GetConsumerStatusBody{ConsumerTable: map[string]map[MessageQueue]int64{}}
	fields, err := topLevelFields(data)
	if err != nil {
		return b, fmt.Errorf("protocol: consumer status: %w", err)
	}
	table, ok := fields["consumerTable"]
	if !ok {
		return b, nil
	}
	err = objectKeyed(table, func(k, v []byte) error {
		var id string
		if err := json.Unmarshal(k, &id); err != nil {
			return fmt.Errorf("client id %s: %w", k, err)
		}
		offsets := map[MessageQueue]int64{}
		if err := readQueueOffsets(v, offsets); err != nil {
			return fmt.Errorf("client %s: %w", id, err)
		}
		b.ConsumerTable[id] = offsets
		return nil
	})
	if err != nil {
		return b, fmt.Errorf("protocol: consumer status consumerTable: %w", err)
	}
	return b, nil
}

// appendQueueOffsets appends {{queue}:offset,...}, queues sorted.
func appendQueueOffsets(out []byte, table map[MessageQueue]int64) ([]byte, error) {
	return appendQueueKeyed(out, table, func(b []byte, off int64) ([]byte, error) { return strconv.AppendInt(b, off, 10), nil })
}

// appendQueueKeyed appends table as fastjson writes a map keyed by
// MessageQueue, {{queue}:value,...}, queues sorted; value appends one value.
func appendQueueKeyed[V any](out []byte, table map[MessageQueue]V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	out = append(out, '{')
	for i, q := range slices.SortedFunc(maps.Keys(table), CompareQueues) {
		if i > 0 {
			out = append(out, ',')
		}
		k, err := json.Marshal(q)
		if err != nil {
			return nil, err
		}
		out = append(append(out, k...), ':')
		if out, err = value(out, table[q]); err != nil {
			return nil, err
		}
	}
	return append(out, '}'), nil
}

// readQueueOffsets reads {{queue}:offset,...} into table.
func readQueueOffsets(data []byte, table map[MessageQueue]int64) error {
	return objectKeyed(data, func(k, v []byte) error {
		var q MessageQueue
		var off int64
		if err := json.Unmarshal(k, &q); err != nil {
			return fmt.Errorf("queue %s: %w", k, err)
		}
		if err := json.Unmarshal(v, &off); err != nil {
			return fmt.Errorf("queue %s: offset: %w", k, err)
		}
		table[q] = off
		return nil
	})
}
