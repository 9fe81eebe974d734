package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/message"
)

// unknown is what tables show for a value nobody knows (JSON shows null).
const unknown = "unknown"

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON output: %w", err)
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(headers) > 0 {
		cells := make([]any, len(headers))
		for i, h := range headers {
			cells[i] = "#" + h
		}
		t.row(cells...)
	}
	return t
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprint(t.tw, "\n")
}

func (t *table) flush() error { return t.tw.Flush() }

// fmtTime formats a millisecond timestamp for tables; 0 is "-".
func fmtTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return fmtAt(time.UnixMilli(ms))
}

// fmtAt formats a time the user gave, where 0 ms is the epoch, not the
// "never" of fmtTime's "-".
func fmtAt(t time.Time) string { return t.Format("2006-01-02 15:04:05.000") }

// jsonTime formats a millisecond timestamp for JSON; 0 is null.
func jsonTime(ms int64) *string {
	if ms <= 0 {
		return nil
	}
	s := time.UnixMilli(ms).Format(time.RFC3339Nano)
	return &s
}

// fmtDuration formats a lag time for tables.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// orUnknown formats *v, or "unknown" when v is nil.
func orUnknown[T any](v *T, f func(T) string) string {
	if v == nil {
		return unknown
	}
	return f(*v)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// msgView is a message as mqadmin prints it.
type msgView struct {
	Topic           string            `json:"topic"`
	BrokerName      string            `json:"brokerName,omitempty"`
	QueueID         int               `json:"queueId"`
	QueueOffset     int64             `json:"queueOffset"`
	MsgID           string            `json:"msgId"`
	OffsetMsgID     string            `json:"offsetMsgId"`
	CommitLogOffset int64             `json:"commitLogOffset"`
	Keys            []string          `json:"keys"`
	Tags            string            `json:"tags"`
	BornTimestamp   int64             `json:"bornTimestamp"`
	BornTime        *string           `json:"bornTime"`
	BornHost        string            `json:"bornHost"`
	StoreTimestamp  int64             `json:"storeTimestamp"`
	StoreTime       *string           `json:"storeTime"`
	StoreHost       string            `json:"storeHost"`
	ReconsumeTimes  int               `json:"reconsumeTimes"`
	Properties      map[string]string `json:"properties"`
	BodyLength      int               `json:"bodyLength"`
	BodyEncoding    string            `json:"bodyEncoding"` // "text" or "hex"
	Body            string            `json:"body"`
}

// viewOf describes m. The topic is the one the message is stored in (a
// retried message's original topic is its RETRY_TOPIC property).
func viewOf(m *client.Message) msgView {
	v := msgView{
		Topic: m.Queue.Topic, BrokerName: m.Queue.BrokerName, QueueID: m.Queue.QueueID, QueueOffset: m.QueueOffset,
		MsgID: m.Properties[message.PropUniqKey], OffsetMsgID: m.OffsetMsgID, CommitLogOffset: m.CommitLogOffset,
		Keys: m.Keys, Tags: m.Tags, BornHost: m.BornHost, StoreHost: m.StoreHost, ReconsumeTimes: m.ReconsumeTimes,
		Properties: m.Properties, BodyLength: len(m.Body),
	}
	if v.Topic == "" {
		v.Topic = m.Topic
	}
	if v.MsgID == "" {
		v.MsgID = m.MsgID
	}
	if v.Keys == nil {
		v.Keys = []string{}
	}
	if v.Properties == nil {
		v.Properties = map[string]string{}
	}
	if !m.BornTimestamp.IsZero() {
		v.BornTimestamp = m.BornTimestamp.UnixMilli()
	}
	if !m.StoreTimestamp.IsZero() {
		v.StoreTimestamp = m.StoreTimestamp.UnixMilli()
	}
	v.BornTime, v.StoreTime = jsonTime(v.BornTimestamp), jsonTime(v.StoreTimestamp)
	if printable(m.Body) {
		v.BodyEncoding, v.Body = "text", string(m.Body)
	} else {
		v.BodyEncoding, v.Body = "hex", hex.EncodeToString(m.Body)
	}
	return v
}

// printable reports whether b is UTF-8 text: printable characters and
// ordinary whitespace only.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

// maxTableHex bounds the hex dump of a binary body in table output; JSON
// always carries all of it.
const maxTableHex = 1024

// printMessages writes messages as blocks of "Name: value" lines, or as a
// JSON array.
func (a *app) printMessages(msgs []*client.Message) error {
	views := make([]msgView, len(msgs))
	for i, m := range msgs {
		views[i] = viewOf(m)
	}
	if a.json {
		return a.printJSON(views)
	}
	for i, v := range views {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		if err := writeMessage(a.stdout, v); err != nil {
			return err
		}
	}
	return nil
}

func writeMessage(w io.Writer, v msgView) error {
	t := newTable(w)
	queue := strconv.Itoa(v.QueueID)
	if v.BrokerName != "" {
		queue = v.BrokerName + " #" + queue
	}
	t.row("Topic:", v.Topic)
	t.row("Queue:", queue)
	t.row("Queue Offset:", v.QueueOffset)
	t.row("Msg ID (UNIQ_KEY):", v.MsgID)
	t.row("Offset Msg ID:", v.OffsetMsgID)
	t.row("CommitLog Offset:", v.CommitLogOffset)
	t.row("Keys:", strings.Join(v.Keys, " "))
	t.row("Tags:", v.Tags)
	t.row("Born Time:", fmtTime(v.BornTimestamp)+"  from "+v.BornHost)
	t.row("Store Time:", fmtTime(v.StoreTimestamp)+"  on "+v.StoreHost)
	t.row("Reconsume Times:", v.ReconsumeTimes)
	for i, k := range slices.Sorted(maps.Keys(v.Properties)) {
		label := ""
		if i == 0 {
			label = "Properties:"
		}
		t.row(label, k+"="+v.Properties[k])
	}
	if err := t.flush(); err != nil {
		return err
	}
	switch {
	case v.BodyEncoding == "text":
		fmt.Fprintf(w, "Body (%d bytes, text):\n%s\n", v.BodyLength, indent(v.Body))
	case len(v.Body) > maxTableHex:
		fmt.Fprintf(w, "Body (%d bytes, binary, first %d shown as hex; --json shows all):\n  %s...\n",
			v.BodyLength, maxTableHex/2, v.Body[:maxTableHex])
	default:
		fmt.Fprintf(w, "Body (%d bytes, binary, hex):\n  %s\n", v.BodyLength, v.Body)
	}
	return nil
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// parseTime reads a time flag: milliseconds since the epoch, "now",
// RFC 3339 (2024-05-01T10:00:00Z) or RocketMQ's yyyy-MM-dd#HH:mm:ss:SSS
// (local time).
func parseTime(flag, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "now" {
		return time.Now(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02#15:04:05:000", s, time.Local); err == nil {
		return t, nil
	}
	return time.Time{}, usagef(`-%s %q is not a time: give milliseconds since the epoch, "now", RFC 3339 `+
		`(2006-01-02T15:04:05Z07:00) or yyyy-MM-dd#HH:mm:ss:SSS`, flag, s)
}
