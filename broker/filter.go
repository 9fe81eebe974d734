package broker

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluicemq/sluice/broker/group"
	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/filter"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
)

// Message filters: TAG subscriptions filter by the consume queue's tags
// code, SQL92 subscriptions (filter.property_enabled) by the properties of
// each stored message, which Get reads anyway. A SQL92 expression is
// compiled once per version: when a group's registered subscription has
// the same type and expression, its compiled filter is reused.

// subscriptionError is a subscription the broker refuses, with the
// response code and remark that say why.
type subscriptionError struct {
	code   int16
	remark string
}

func (e *subscriptionError) Error() string { return e.remark }

// parseSubscription parses a subscription of groupName, reusing the
// group's registered one when it filters alike.
func (b *Broker) parseSubscription(groupName, topicName, typ, expr string) (group.Subscription, *subscriptionError) {
	isSQL := strings.EqualFold(typ, group.TypeSQL92)
	if isSQL && !b.cfg.Filter.PropertyEnabled {
		return group.Subscription{}, &subscriptionError{protocol.SystemError, fmt.Sprintf(
			"broker %s does not filter messages by SQL92: set filter.property_enabled: true in its configuration (or SLUICE_FILTER_PROPERTY_ENABLED=true)",
			b.cfg.BrokerName)}
	}
	if reg, ok, _ := b.groups.Subscription(groupName, topicName); ok && reg.Expression == expr &&
		(reg.Type == group.TypeSQL92) == isSQL {
		return reg, nil
	}
	s, err := group.Parse(topicName, typ, expr)
	if err != nil {
		var se *filter.SyntaxError
		if errors.As(err, &se) {
			return s, &subscriptionError{protocol.SubscriptionParseFailed, fmt.Sprintf(
				"cannot parse the SQL92 expression of group %s on topic %s: %v", groupName, topicName, err)}
		}
		return s, &subscriptionError{protocol.SubscriptionParseFailed, err.Error()}
	}
	return s, nil
}

// pullSubscription returns the subscription a pull is filtered with: its
// own expression when it has one (sysFlag subscription bit), else the one
// its group registered with heartbeats.
func (b *Broker) pullSubscription(h *protocol.PullMessageRequestHeader) (group.Subscription, *subscriptionError) {
	if h.SysFlag&pullSubscription != 0 {
		// NB: the official Go client's pull consumer sends its SQL92
		// expression labelled TAG: take it as the SQL92 subscription it
		// registered.
		reg, ok, _ := b.groups.Subscription(h.ConsumerGroup, h.Topic)
		if ok && reg.Type == group.TypeSQL92 && reg.Expression == h.Subscription &&
			(h.ExpressionType == "" || strings.EqualFold(h.ExpressionType, group.TypeTag)) {
			return reg, nil
		}
		return b.parseSubscription(h.ConsumerGroup, h.Topic, h.ExpressionType, h.Subscription)
	}
	s, found, known := b.groups.Subscription(h.ConsumerGroup, h.Topic)
	switch {
	case !known:
		return s, &subscriptionError{protocol.SubscriptionNotExist, fmt.Sprintf(
			"consumer group %s has no live member on broker %s: send a heartbeat first", h.ConsumerGroup, b.cfg.BrokerName)}
	case !found:
		return s, &subscriptionError{protocol.SubscriptionNotExist, fmt.Sprintf(
			"consumer group %s does not subscribe to topic %s", h.ConsumerGroup, h.Topic)}
	case s.SubVersion < h.SubVersion:
		return s, &subscriptionError{protocol.SubscriptionNotLatest, fmt.Sprintf(
			"the subscription of group %s to topic %s is version %d on broker %s, the pull has %d: send a heartbeat first",
			h.ConsumerGroup, h.Topic, s.SubVersion, b.cfg.BrokerName, h.SubVersion)}
	}
	return s, nil
}

// pullFilter decides which messages a pull takes.
type pullFilter struct {
	codes *message.TagCodeSet // tags codes; nil takes every tag
	sql   *filter.Expr        // the subscription's SQL92 filter
	// retry holds, for a pull of a retry topic, the group's SQL92 filters
	// by original topic (a retried message's RETRY_TOPIC).
	retry map[string]*filter.Expr
}

// newPullFilter builds the filter of a pull of groupName with sub.
func (b *Broker) newPullFilter(groupName string, sub group.Subscription) *pullFilter {
	f := &pullFilter{codes: sub.Codes, sql: sub.SQL}
	if strings.HasPrefix(sub.Topic, topic.RetryPrefix) && b.cfg.Filter.PropertyEnabled {
		for t, s := range b.groups.Subscriptions(groupName) {
			if s.SQL != nil {
				if f.retry == nil {
					f.retry = map[string]*filter.Expr{}
				}
				f.retry[t] = s.SQL
			}
		}
	}
	return f
}

// propsFilter returns the store's Filter hook, nil when properties do not
// matter.
func (f *pullFilter) propsFilter() func([]byte) bool {
	if f.sql == nil && f.retry == nil {
		return nil
	}
	return f.props
}

// props reports whether a message with these properties passes the SQL92
// filter.
func (f *pullFilter) props(p []byte) bool {
	e := f.sql
	if e == nil && f.retry != nil {
		if rt, ok := message.PropertyValueBytes(p, message.PropRetryTopic); ok {
			e = f.retry[string(rt)]
		}
	}
	if e == nil {
		return true
	}
	return e.MatchProperties(p)
}

// match is the long-poll hold's test of an arrived message.
func (f *pullFilter) match(tagsCode int64, p []byte) bool {
	if !f.codes.Has(tagsCode) {
		return false
	}
	return f.props(p)
}
