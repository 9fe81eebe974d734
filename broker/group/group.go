// Package group is the broker's registry of consumer and producer groups,
// learned from heartbeats (RocketMQ's ConsumerManager, ProducerManager and
// RebalanceLockManager): which clients belong to a group, on which
// connection, with which subscriptions, and which client holds the lock of
// each queue for orderly consumption.
package group

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/filter"
	"github.com/sluicemq/sluice/internal/message"
)

// Expression types of a subscription (SubscriptionData.expressionType).
const (
	TypeTag   = "TAG"
	TypeSQL92 = "SQL92"
)

// Subscription is one topic subscription of a consumer group.
type Subscription struct {
	Topic      string
	Type       string // TypeTag or TypeSQL92
	Expression string // as sent: "*", "TagA || TagB" or a SQL92 expression
	Tags       []string
	Codes      *message.TagCodeSet // tag hash codes; nil means every message
	SQL        *filter.Expr        // the compiled SQL92 expression; nil for TAG
	SubVersion int64
}

// Parse parses a subscription of expression type typ: "" or TAG (a tag
// expression, see ParseSubscription) or SQL92 (compiled; its errors are
// *filter.SyntaxError). The type is matched ignoring case, as RocketMQ.
func Parse(topic, typ, expr string) (Subscription, error) {
	switch strings.ToUpper(typ) {
	case "", TypeTag:
		s := ParseSubscription(topic, expr)
		s.Type = TypeTag
		return s, nil
	case TypeSQL92:
		e, err := filter.Compile(expr)
		if err != nil {
			return Subscription{}, err
		}
		return Subscription{Topic: topic, Type: TypeSQL92, Expression: expr, SQL: e}, nil
	}
	return Subscription{}, fmt.Errorf("group: unknown expression type %q (TAG or SQL92)", typ)
}

// Same reports whether two subscriptions filter alike (type and
// expression).
func (s Subscription) Same(o Subscription) bool {
	return s.Type == o.Type && s.Expression == o.Expression
}

// ParseSubscription parses a tag expression: tags joined by "||"; "*" or
// "" means every message. Hash codes are computed here, never trusted from
// the client (the Go client hashes bytes, Java UTF-16 units).
func ParseSubscription(topic, expr string) Subscription {
	s := Subscription{Topic: topic, Expression: expr}
	e := strings.TrimSpace(expr)
	if e == "" || e == "*" {
		return s
	}
	// NB: deduplicated with a set: a list search took a heartbeat's
	// 40,000 tags 1.6 s of comparisons, a 16 MiB one hours.
	seen := map[string]bool{}
	var codes []int64
	for t := range strings.SplitSeq(e, "||") {
		t = strings.TrimSpace(t)
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		s.Tags = append(s.Tags, t)
		codes = append(codes, message.TagsHashCode(t))
	}
	if len(s.Tags) == 0 {
		s.Tags = nil
	}
	s.Codes = message.NewTagCodeSet(codes)
	return s
}

// Matches reports whether a tags code passes the subscription.
func (s Subscription) Matches(code int64) bool {
	return s.Codes.Has(code)
}

// Consumer is one client's membership in a consumer group.
type Consumer struct {
	ClientID         string
	ConnID           uint64
	MessageModel     string // CLUSTERING or BROADCASTING
	ConsumeType      string // CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (pull)
	ConsumeFromWhere string
	Subs             map[string]Subscription
	LastSeen         time.Time
	// Addr, Language and Version describe the client's connection.
	Addr     string
	Language string
	Version  int32
}

type consumerKey struct {
	clientID string
	connID   uint64
}

type groupState struct {
	consumers map[consumerKey]*Consumer
	producers map[consumerKey]producerEntry
}

// producerEntry is a producer's registration on one connection.
type producerEntry struct {
	at       time.Time
	language string // the client's LanguageCode name, "" when unknown
	version  int32  // its MQVersion ordinal, 0 when unknown
}

// Producer is a producer group member on one connection.
type Producer struct {
	ClientID string
	ConnID   uint64
	LastSeen time.Time
	Language string // "" when it registered by a send (request-reply), not a heartbeat
	Version  int32
}

// Registry is safe for concurrent use.
type Registry struct {
	mu sync.Mutex
	// guarded by mu:
	groups    map[string]*groupState
	producers map[string]*groupState // producer groups
	locks     map[lockKey]lockHolder
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{groups: map[string]*groupState{}, producers: map[string]*groupState{}, locks: map[lockKey]lockHolder{}}
}

// Register adds or refreshes a consumer. It reports whether the group's
// membership or subscriptions changed (the broker then notifies the group).
func (r *Registry) Register(group string, c Consumer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		g = &groupState{consumers: map[consumerKey]*Consumer{}}
		r.groups[group] = g
	}
	k := consumerKey{c.ClientID, c.ConnID}
	old, ok := g.consumers[k]
	cc := c
	g.consumers[k] = &cc
	if !ok {
		return true
	}
	return !sameSubs(old.Subs, c.Subs)
}

func sameSubs(a, b map[string]Subscription) bool {
	if len(a) != len(b) {
		return false
	}
	for t, s := range a {
		o, ok := b[t]
		if !ok || !o.Same(s) {
			return false
		}
	}
	return true
}

// RegisterProducer records a producer group member.
func (r *Registry) RegisterProducer(group, clientID string, connID uint64, now time.Time) {
	r.RegisterProducerSDK(group, clientID, connID, now, "", 0)
}

// RegisterProducerSDK records a producer group member with its client's
// language and version (from its heartbeat); "" and 0 keep what is known.
func (r *Registry) RegisterProducerSDK(group, clientID string, connID uint64, now time.Time, language string, version int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.producers[group]
	if g == nil {
		g = &groupState{producers: map[consumerKey]producerEntry{}}
		r.producers[group] = g
	}
	k := consumerKey{clientID, connID}
	e := g.producers[k]
	e.at = now
	if language != "" {
		e.language, e.version = language, version
	}
	g.producers[k] = e
}

// Producers returns a producer group's members, sorted by client id.
func (r *Registry) Producers(group string) []Producer {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.producers[group]
	if g == nil {
		return nil
	}
	out := make([]Producer, 0, len(g.producers))
	for k, e := range g.producers {
		out = append(out, Producer{ClientID: k.clientID, ConnID: k.connID, LastSeen: e.at, Language: e.language, Version: e.version})
	}
	slices.SortFunc(out, func(a, b Producer) int {
		return cmp.Or(strings.Compare(a.ClientID, b.ClientID), cmp.Compare(a.ConnID, b.ConnID))
	})
	return out
}

// ClientCounts returns how many distinct clients are registered as
// consumers (in any group) and as producers.
func (r *Registry) ClientCounts() (consumers, producers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := map[string]bool{}
	for _, g := range r.groups {
		for k := range g.consumers {
			ids[k.clientID] = true
		}
	}
	consumers = len(ids)
	clear(ids)
	for _, g := range r.producers {
		for k := range g.producers {
			ids[k.clientID] = true
		}
	}
	return consumers, len(ids)
}

// ClientProducerConns returns the connections producers registered with
// clientID, in any group, the most recently seen first (request-reply
// pushes a reply on the one whose client waits for it).
func (r *Registry) ClientProducerConns(clientID string) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[uint64]time.Time{}
	for _, g := range r.producers {
		for k, e := range g.producers {
			if k.clientID == clientID && e.at.After(seen[k.connID]) {
				seen[k.connID] = e.at
			}
		}
	}
	ids := slices.Collect(maps.Keys(seen))
	slices.SortFunc(ids, func(a, b uint64) int { return seen[b].Compare(seen[a]) })
	return ids
}

// Unregister removes a client from a consumer group and reports whether it
// was a member.
func (r *Registry) Unregister(group, clientID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		return false
	}
	removed := false
	for k := range g.consumers {
		if k.clientID == clientID {
			delete(g.consumers, k)
			removed = true
		}
	}
	r.dropEmptyLocked(group)
	return removed
}

// DropConn removes every registration made on a connection and returns the
// consumer groups that lost a member.
func (r *Registry) DropConn(connID uint64) []string {
	return r.drop(func(k consumerKey, _ time.Time) bool { return k.connID == connID })
}

// Expire removes registrations not refreshed since before cutoff and returns
// the consumer groups that lost a member.
func (r *Registry) Expire(cutoff time.Time) []string {
	return r.drop(func(_ consumerKey, seen time.Time) bool { return seen.Before(cutoff) })
}

func (r *Registry) drop(match func(consumerKey, time.Time) bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var changed []string
	for name, g := range r.groups {
		n := len(g.consumers)
		for k, c := range g.consumers {
			if match(k, c.LastSeen) {
				delete(g.consumers, k)
			}
		}
		if len(g.consumers) != n {
			changed = append(changed, name)
		}
		r.dropEmptyLocked(name)
	}
	for name, g := range r.producers {
		for k, e := range g.producers {
			if match(k, e.at) {
				delete(g.producers, k)
			}
		}
		if len(g.producers) == 0 {
			delete(r.producers, name)
		}
	}
	slices.Sort(changed)
	return changed
}

// REQUIRES: mu held.
func (r *Registry) dropEmptyLocked(group string) {
	if g := r.groups[group]; g != nil && len(g.consumers) == 0 {
		delete(r.groups, group)
	}
}

// ConsumerIDs returns the client ids of a group's live members, sorted.
func (r *Registry) ConsumerIDs(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		return nil
	}
	set := map[string]bool{}
	for k := range g.consumers {
		set[k.clientID] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// ConnIDs returns the connections of a group's members.
func (r *Registry) ConnIDs(group string) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		return nil
	}
	var out []uint64
	for k := range g.consumers {
		if !slices.Contains(out, k.connID) {
			out = append(out, k.connID)
		}
	}
	return out
}

// ProducerConnIDs returns the connections of a producer group's members.
func (r *Registry) ProducerConnIDs(group string) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.producers[group]
	if g == nil {
		return nil
	}
	var out []uint64
	for k := range g.producers {
		out = append(out, k.connID)
	}
	return out
}

// Subscription returns a group's subscription to a topic, the newest
// version its members registered (RocketMQ keeps the highest subVersion),
// and whether the group exists.
func (r *Registry) Subscription(group, topic string) (sub Subscription, ok, groupKnown bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		return Subscription{}, false, false
	}
	for _, c := range g.consumers {
		if s, found := c.Subs[topic]; found && (!ok || s.SubVersion > sub.SubVersion) {
			sub, ok = s, true
		}
	}
	return sub, ok, true
}

// Subscriptions returns a group's subscriptions by topic, the newest
// version of each.
func (r *Registry) Subscriptions(group string) map[string]Subscription {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		return nil
	}
	out := map[string]Subscription{}
	for _, c := range g.consumers {
		for t, s := range c.Subs {
			if o, found := out[t]; !found || s.SubVersion > o.SubVersion {
				out[t] = s
			}
		}
	}
	return out
}

// Consumers returns copies of a group's members.
func (r *Registry) Consumers(group string) []Consumer {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		return nil
	}
	out := make([]Consumer, 0, len(g.consumers))
	for _, c := range g.consumers {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Consumer) int { return strings.Compare(a.ClientID, b.ClientID) })
	return out
}

// Groups returns the names of the consumer groups with live members.
func (r *Registry) Groups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.groups))
}
