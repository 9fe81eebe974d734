package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/protocol"
)

// groupRow is one group in GET /api/groups.
type groupRow struct {
	Group  string `json:"group"`
	System bool   `json:"system"`
	// From the sampler's last point: -1 before the first, or when the
	// group has no committed offset.
	Lag         int64   `json:"lag"`
	LagMs       int64   `json:"lagMs"`
	ConsumeRate float64 `json:"consumeRate"`
	InFlight    int64   `json:"inFlight"` // POP messages delivered, not acked
}

// systemGroup reports whether group is one a broker or tool uses itself.
func systemGroup(group string) bool {
	return group == toolsGroup || strings.HasSuffix(group, "_GROUP") && strings.ToUpper(group) == group ||
		strings.HasPrefix(group, "CID_RMQ_SYS_")
}

// groupNames returns the groups every master has a subscription group
// config for, sorted.
func (s *Server) groupNames(ctx context.Context, ci client.ClusterInfo) ([]string, error) {
	set := map[string]bool{}
	var errs []error
	for _, b := range masters(ci) {
		gs, err := s.admin.SubscriptionGroups(ctx, b.addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, g := range gs {
			set[g] = true
		}
	}
	return slices.Sorted(maps.Keys(set)), errors.Join(errs...)
}

func (s *Server) getGroups(r *http.Request) (any, error) {
	_, names, err := fromMasters(r.Context(), s, s.groupNames)
	if err != nil {
		return nil, err
	}
	out := make([]groupRow, 0, len(names))
	for _, g := range names {
		row := groupRow{Group: g, System: systemGroup(g), Lag: -1, LagMs: -1}
		if p, ok := s.hist.last(groupKey(g)); ok {
			row.Lag, row.LagMs, row.ConsumeRate, row.InFlight = p.Lag, p.LagMs, p.ConsumeRate, p.InFlight
		}
		out = append(out, row)
	}
	return out, nil
}

// progressRow is one queue of GET /api/groups/{group}.
type progressRow struct {
	Topic          string `json:"topic"`
	BrokerName     string `json:"brokerName"`
	QueueID        int    `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`
	ConsumerOffset int64  `json:"consumerOffset"` // -1: none committed
	Lag            int64  `json:"lag"`            // -1: unknown
	LagMs          int64  `json:"lagMs"`          // -1: unknown
}

// popRow is one queue a group consumes by POP (RocketMQ 5 clients), in
// GET /api/groups/{group}.
type popRow struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	InFlight   int    `json:"inFlight"`
	Waiting    int    `json:"waiting"` // FIFO messages behind their message group's
	// OldestInFlightMs: age of the oldest message in flight; -1 when none.
	OldestInFlightMs int64 `json:"oldestInFlightMs"`
	Redeliveries     int64 `json:"redeliveries"`
	DLQ              int64 `json:"dlq"`
}

// popStatus returns group's POP state on every master, per queue; masters
// that do not serve POP_STATUS (not Sluice) are left out.
func (s *Server) popStatus(ctx context.Context, ci client.ClusterInfo, group string) ([]client.PopQueueStatus, error) {
	var out []client.PopQueueStatus
	var errs []error
	for _, b := range masters(ci) {
		qs, err := s.admin.PopStatus(ctx, b.addr, b.name, group, "")
		if errors.Is(err, &client.BrokerError{Code: client.CodeRequestNotSupported}) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, qs...)
	}
	return out, errors.Join(errs...)
}

// memberView is one live client of a group.
type memberView struct {
	ClientID        string            `json:"clientId"`
	ClientAddr      string            `json:"clientAddr"`
	Language        string            `json:"language"`
	Version         string            `json:"version"`
	Subscriptions   map[string]string `json:"subscriptions"`
	ExpressionTypes map[string]string `json:"expressionTypes"`
	Brokers         []string          `json:"brokers"`
}

// groupView is GET /api/groups/{group}.
type groupView struct {
	Group        string        `json:"group"`
	ConsumeType  string        `json:"consumeType,omitempty"`
	MessageModel string        `json:"messageModel,omitempty"`
	ConsumeFrom  string        `json:"consumeFromWhere,omitempty"`
	Online       bool          `json:"online"` // some member is connected
	Members      []memberView  `json:"members"`
	Topics       []string      `json:"topics"`
	Queues       []progressRow `json:"queues"`
	Lag          int64         `json:"lag"`   // sum of the known lags
	LagMs        int64         `json:"lagMs"` // the largest known; -1 when none is
	UnknownLag   int           `json:"unknownLag"`
	History      []Point       `json:"history"` // the group's lag and rates, last hour
	// Pop: the queues the group consumes by POP (RocketMQ 5 clients),
	// empty when it consumes none that way.
	Pop []popRow `json:"pop"`
}

func (s *Server) getGroup(r *http.Request) (any, error) {
	g := r.PathValue("group")
	cp, err := s.admin.ConsumeStats(r.Context(), g, "")
	if err != nil {
		return nil, err
	}
	out := groupView{Group: g, Members: []memberView{}, Topics: []string{}, Queues: []progressRow{}, Lag: cp.Lag,
		LagMs: cp.LagTime.Milliseconds(), UnknownLag: cp.UnknownLag, History: emptyIfNil(s.hist.points(groupKey(g)))}
	if cp.LagTime < 0 {
		out.LagMs = -1
	}
	for _, q := range cp.Queues {
		row := progressRow{Topic: q.Queue.Topic, BrokerName: q.Queue.BrokerName, QueueID: q.Queue.QueueID,
			BrokerOffset: q.BrokerOffset, ConsumerOffset: q.ConsumerOffset, Lag: q.Lag, LagMs: q.LagTime.Milliseconds()}
		if q.LagTime < 0 {
			row.LagMs = -1
		}
		out.Queues = append(out.Queues, row)
		if !slices.Contains(out.Topics, row.Topic) {
			out.Topics = append(out.Topics, row.Topic)
		}
	}
	ci, err := s.admin.ClusterInfo(r.Context())
	if err != nil {
		return nil, err
	}
	meta, ms, err := s.members(r.Context(), ci, g)
	if err != nil {
		return nil, err
	}
	out.ConsumeType, out.MessageModel, out.ConsumeFrom = meta.ConsumeType, meta.MessageModel, meta.ConsumeFromWhere
	pop, err := s.popStatus(r.Context(), ci, g)
	if err != nil {
		return nil, err
	}
	out.Pop = make([]popRow, 0, len(pop))
	for _, q := range pop {
		row := popRow{Topic: q.Queue.Topic, BrokerName: q.Queue.BrokerName, QueueID: q.Queue.QueueID, InFlight: q.InFlight,
			Waiting: q.Waiting, OldestInFlightMs: -1, Redeliveries: q.Redeliveries, DLQ: q.DLQ}
		if q.OldestInFlight >= 0 {
			row.OldestInFlightMs = q.OldestInFlight.Milliseconds()
		}
		out.Pop = append(out.Pop, row)
	}
	for _, m := range ms {
		v := memberView{ClientID: m.ClientID, ClientAddr: m.ClientAddr, Language: m.Language,
			Version: protocol.VersionName(m.Version), Subscriptions: m.Subscriptions, ExpressionTypes: m.ExpressionTypes}
		for _, b := range m.brokers {
			v.Brokers = append(v.Brokers, b.name)
		}
		out.Members = append(out.Members, v)
	}
	out.Online = len(out.Members) > 0
	if !out.Online && len(out.Queues) == 0 && len(out.Pop) == 0 {
		names, err := s.groupNames(r.Context(), ci)
		if err == nil && !slices.Contains(names, g) {
			return nil, &httpError{status: http.StatusNotFound, msg: "no broker knows consumer group " + g}
		}
	}
	return out, nil
}

// resetForm is the body of POST /api/groups/{group}/reset.
type resetForm struct {
	Topic string    `json:"topic"`
	Time  timeValue `json:"time"` // RFC 3339 or unix milliseconds
}

// timeValue is a time given as a JSON string (any form parseTime reads)
// or as a JSON number of unix milliseconds.
type timeValue string

func (v *timeValue) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, (*string)(v))
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*v = timeValue(n)
	return nil
}

// resetRow is one queue's new offset.
type resetRow struct {
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	Offset     int64  `json:"offset"`
}

func (s *Server) postReset(r *http.Request) (any, error) {
	g := r.PathValue("group")
	var f resetForm
	if err := decodeJSON(r, &f); err != nil {
		return nil, err
	}
	if f.Topic == "" || f.Time == "" {
		return nil, badRequest("topic and time are required")
	}
	t, err := parseTime("time", string(f.Time))
	if err != nil {
		return nil, err
	}
	offs, err := s.admin.ResetOffsetByTime(r.Context(), g, f.Topic, t)
	if err != nil {
		return nil, err
	}
	byQueue := func(x, y client.MessageQueue) int {
		return cmp.Or(strings.Compare(x.BrokerName, y.BrokerName), cmp.Compare(x.QueueID, y.QueueID))
	}
	out := make([]resetRow, 0, len(offs))
	for _, q := range slices.SortedFunc(maps.Keys(offs), byQueue) {
		out = append(out, resetRow{BrokerName: q.BrokerName, QueueID: q.QueueID, Offset: offs[q]})
	}
	return map[string]any{"group": g, "topic": f.Topic, "time": t.UnixMilli(), "offsets": out}, nil
}

// liveView is GET /api/live: a topic's flow through a group.
type liveView struct {
	Topic    string  `json:"topic"`
	Group    string  `json:"group"`
	EveryMs  int64   `json:"everyMs"`
	Points   []Point `json:"points"`
	Sampling bool    `json:"sampling"` // false until the sampler has seen the pair
}

func (s *Server) getLive(r *http.Request) (any, error) {
	q := r.URL.Query()
	topic, g := q.Get("topic"), q.Get("group")
	if topic == "" || g == "" {
		return nil, badRequest("topic and group are required")
	}
	pts := s.hist.points(flowKey(g, topic))
	return liveView{Topic: topic, Group: g, EveryMs: s.opts.SampleEvery.Milliseconds(), Points: emptyIfNil(pts), Sampling: pts != nil}, nil
}

// memberStatus is one member's running info in GET /api/groups/{group}/status.
type memberStatus struct {
	ClientID     string  `json:"clientId"`
	Broker       string  `json:"broker"` // the broker that relayed the request
	ConsumeType  string  `json:"consumeType,omitempty"`
	Queues       int     `json:"queues"`
	CachedMsgs   int     `json:"cachedMsgs"`
	PullTPS      float64 `json:"pullTps"`
	ConsumeOK    float64 `json:"consumeOkTps"`
	ConsumeFail  float64 `json:"consumeFailedTps"`
	FailedInHour int64   `json:"failedInHour"`
	Error        string  `json:"error,omitempty"`
}

// memberAt is a live member of a group and the masters it is registered
// with.
type memberAt struct {
	client.ConsumerMember
	brokers []brokerRef
}

// members returns the live members of group, their subscriptions merged
// over the masters, sorted by client id; and the group's consume type,
// model and start as the last master answering says.
func (s *Server) members(ctx context.Context, ci client.ClusterInfo, group string) (client.GroupConnections, []memberAt, error) {
	var meta client.GroupConnections
	byID := map[string]*memberAt{}
	for _, b := range masters(ci) {
		cc, err := s.admin.ConsumerConnections(ctx, b.addr, group)
		if errors.Is(err, &client.BrokerError{Code: client.Code(protocol.ConsumerNotOnline)}) {
			continue
		}
		if err != nil {
			return meta, nil, err
		}
		meta = client.GroupConnections{ConsumeType: cc.ConsumeType, MessageModel: cc.MessageModel, ConsumeFromWhere: cc.ConsumeFromWhere}
		for _, m := range cc.Members {
			v := byID[m.ClientID]
			if v == nil {
				v = &memberAt{ConsumerMember: m}
				byID[m.ClientID] = v
			} else {
				maps.Copy(v.Subscriptions, m.Subscriptions)
				maps.Copy(v.ExpressionTypes, m.ExpressionTypes)
			}
			v.brokers = append(v.brokers, b)
		}
	}
	out := make([]memberAt, 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		out = append(out, *byID[id])
	}
	return meta, out, nil
}

// liveMembers is members of a group that must have one.
func (s *Server) liveMembers(ctx context.Context, group string) ([]memberAt, error) {
	ci, err := s.admin.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	_, ms, err := s.members(ctx, ci, group)
	if err == nil && len(ms) == 0 {
		err = &httpError{status: http.StatusNotFound, msg: "consumer group " + group + " has no live client on any broker"}
	}
	return ms, err
}

func (s *Server) getGroupStatus(r *http.Request) (any, error) {
	g := r.PathValue("group")
	ms, err := s.liveMembers(r.Context(), g)
	if err != nil {
		return nil, err
	}
	out := make([]memberStatus, 0, len(ms))
	for _, m := range ms {
		st := memberStatus{ClientID: m.ClientID, Broker: m.brokers[0].name}
		info, err := s.admin.ConsumerRunningInfo(r.Context(), m.brokers[0].addr, g, m.ClientID, false)
		if err != nil {
			st.Error = err.Error()
			out = append(out, st)
			continue
		}
		st.ConsumeType, st.Queues = info.Properties[protocol.PropConsumeType], len(info.MQTable)
		for _, q := range info.MQTable {
			st.CachedMsgs += q.CachedMsgCount
		}
		for _, cs := range info.StatusTable {
			st.PullTPS += cs.PullTPS
			st.ConsumeOK += cs.ConsumeOKTPS
			st.ConsumeFail += cs.ConsumeFailedTPS
			st.FailedInHour += cs.ConsumeFailedMsgs
		}
		out = append(out, st)
	}
	return out, nil
}
