package protocol

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// ResetOffsetBody is the body of RESET_CONSUMER_CLIENT_OFFSET and of the
// answer to INVOKE_BROKER_TO_RESET_OFFSET: the new offset of each queue.
//
// NB: its JSON is Java's gson form, an array of [MessageQueue, offset]
// pairs, because a map keyed by objects is not JSON; the official Go
// client parses exactly that compact form (fields in the order topic,
// brokerName, queueId). The fastjson form, an object with object keys,
// is not valid JSON and is also read.
type ResetOffsetBody struct {
	OffsetTable map[MessageQueue]int64
}

// MarshalJSON writes the gson form, sorted for a stable output.
func (b ResetOffsetBody) MarshalJSON() ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(`{"offsetTable":[`)
	for i, q := range slices.SortedFunc(maps.Keys(b.OffsetTable), CompareQueues) {
		if i > 0 {
			out.WriteByte(',')
		}
		k, err := json.Marshal(q)
		if err != nil {
			return nil, err
		}
		out.WriteByte('[')
		out.Write(k)
		out.WriteByte(',')
		out.WriteString(strconv.FormatInt(b.OffsetTable[q], 10))
		out.WriteByte(']')
	}
	out.WriteString("]}")
	return out.Bytes(), nil
}

// UnmarshalJSON reads the gson form or the fastjson form.
func (b *ResetOffsetBody) UnmarshalJSON(data []byte) error {
	b.OffsetTable = map[MessageQueue]int64{}
	var gson struct {
		OffsetTable [][2]json.RawMessage `json:"offsetTable"`
	}
	if err := json.Unmarshal(data, &gson); err == nil {
		for i, pair := range gson.OffsetTable {
			var q MessageQueue
			var off int64
			if err := json.Unmarshal(pair[0], &q); err != nil {
				return fmt.Errorf("protocol: offsetTable entry %d: queue: %w", i, err)
			}
			if err := json.Unmarshal(pair[1], &off); err != nil {
				return fmt.Errorf("protocol: offsetTable entry %d: offset: %w", i, err)
			}
			b.OffsetTable[q] = off
		}
		return nil
	}
	return b.unmarshalFastjson(data)
}

// unmarshalFastjson reads {"offsetTable":{{...queue...}:offset,...}}.
func (b *ResetOffsetBody) unmarshalFastjson(data []byte) error {
	fields, err := topLevelFields(data)
	if err != nil {
		return fmt.Errorf("protocol: offsetTable is neither gson pairs nor fastjson object keys: %w", err)
	}
	table, ok := fields["offsetTable"]
	if !ok {
		return errors.New("protocol: reset offset body has no offsetTable")
	}
	return readQueueOffsets(table, b.OffsetTable)
}

// CompareQueues orders queues by topic, broker name and queue id.
func CompareQueues(x, y MessageQueue) int {
	return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.BrokerName, y.BrokerName), cmp.Compare(x.QueueID, y.QueueID))
}
