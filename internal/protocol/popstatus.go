package protocol

// PopStatus (Sluice, mqadmin popStatus): a POP group's state per queue on
// one broker: ext "consumerGroup" (required) and "topic" (absent: every
// topic); the answer's body is a PopStatusBody. A Sluice-only code, so
// GET_CONSUME_STATS's body stays what 4.x clients decode.
const PopStatus = 31002

func init() { requestNames[PopStatus] = "POP_STATUS" }

// PopQueueStatus is one queue of a PopStatusBody.
type PopQueueStatus struct {
	MessageQueue
	InFlight int `json:"inFlight"` // delivered, not acked
	Waiting  int `json:"waiting"`  // FIFO offsets held back (or released, not delivered yet)
	// OldestInFlightAgeMs: age of the oldest message in flight since it
	// was stored; -1 when none is.
	OldestInFlightAgeMs int64 `json:"oldestInFlightAgeMs"`
	Redeliveries        int64 `json:"redeliveries"` // deliveries with attempt > 1 since the broker started
	DLQ                 int64 `json:"dlq"`          // messages sent to the group's dead-letter topic since the broker started
}

// PopStatusBody answers PopStatus.
type PopStatusBody struct {
	Group  string           `json:"group"`
	Queues []PopQueueStatus `json:"queues"`
}

// PopStatusRequestHeader is PopStatus's ext.
type PopStatusRequestHeader struct {
	ConsumerGroup string
	Topic         string // "": every topic
}

// ToExt implements ExtHeader.
func (h *PopStatusRequestHeader) ToExt(m map[string]string) {
	m["consumerGroup"] = h.ConsumerGroup
	if h.Topic != "" {
		m["topic"] = h.Topic
	}
}

// FromExt implements ExtHeader.
func (h *PopStatusRequestHeader) FromExt(m map[string]string) error {
	*h = PopStatusRequestHeader{ConsumerGroup: m["consumerGroup"], Topic: m["topic"]}
	if h.ConsumerGroup == "" {
		return &FieldError{Header: "PopStatusRequestHeader", Field: "consumerGroup", Err: ErrMissingField}
	}
	return nil
}
