package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicemq/sluice/broker/group"
	"github.com/sluicemq/sluice/broker/topic"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// validGroup reports whether name is a group name (RocketMQ's rules, those
// of a topic name), and answers req SYSTEM_ERROR saying why when it is not.
func validGroup(w remoting.ResponseWriter, req *remoting.Command, name string) bool {
	if err := topic.ValidateName(name); err != nil {
		reply(w, req, protocol.SystemError, "bad group name: "+strings.TrimPrefix(err.Error(), "topic: "))
		return false
	}
	return true
}

// handleUpdateSubGroup serves UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200).
func (b *Broker) handleUpdateSubGroup(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var c group.Config
	if err := decodeBody(req, &c); err != nil {
		reply(w, req, protocol.SystemError, "bad subscription group body: "+err.Error())
		return
	}
	if !validGroup(w, req, c.GroupName) {
		return
	}
	if err := b.groupCfgs.Put(c); err != nil {
		reply(w, req, protocol.SystemError, err.Error())
		return
	}
	reply(w, req, protocol.Success, "")
}

// handleAllSubGroups serves GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201).
func (b *Broker) handleAllSubGroups(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	all, v := b.groupCfgs.All()
	b.replyBody(w, req, protocol.SubscriptionGroupWrapper{SubscriptionGroupTable: all, DataVersion: v})
}

// handleDeleteSubGroup serves DELETE_SUBSCRIPTIONGROUP (207): the config and
// the group's consumer offsets go.
func (b *Broker) handleDeleteSubGroup(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.DeleteSubscriptionGroupRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	found, err := b.groupCfgs.Delete(h.GroupName)
	if err != nil {
		reply(w, req, protocol.SystemError, err.Error())
		return
	}
	if !found {
		reply(w, req, protocol.SubscriptionGroupNotExist, fmt.Sprintf("subscription group %s does not exist on broker %s", h.GroupName, b.cfg.BrokerName))
		return
	}
	b.offsets.DeleteGroup(h.GroupName)
	b.pop.DeleteGroup(h.GroupName) // NB: its RocketMQ 5 (POP) state too: else kept for ever, and its acks commit offsets again
	b.popCounts.deleteGroup(h.GroupName)
	reply(w, req, protocol.Success, "")
}

// handleConsumerConnections serves GET_CONSUMER_CONNECTION_LIST (203): the
// group's live clients with their subscriptions, 4.x and v5.
func (b *Broker) handleConsumerConnections(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	var h protocol.GetConsumerListByGroupRequestHeader
	if !decodeHeader(w, req, &h, "bad header") {
		return
	}
	members := b.groups.Consumers(h.ConsumerGroup)
	cc := protocol.ConsumerConnection{SubscriptionTable: map[string]protocol.SubscriptionData{}}
	if len(members) > 0 {
		cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere = members[0].ConsumeType, members[0].MessageModel, members[0].ConsumeFromWhere
	}
	for _, m := range members {
		subs, types := map[string]string{}, map[string]string{}
		for t, s := range m.Subs {
			subs[t], types[t] = s.Expression, s.Type
			if _, ok := cc.SubscriptionTable[t]; !ok {
				cc.SubscriptionTable[t] = protocol.SubscriptionData{Topic: t, SubString: s.Expression, TagsSet: s.Tags,
					SubVersion: s.SubVersion, ExpressionType: s.Type}
			}
		}
		cc.ConnectionSet = append(cc.ConnectionSet, protocol.Connection{ClientID: m.ClientID, ClientAddr: m.Addr,
			Language: m.Language, Version: m.Version, Subscriptions: subs, ExpressionTypes: types})
	}
	if b.v5Consumers(&cc, h.ConsumerGroup)+len(members) == 0 {
		reply(w, req, protocol.ConsumerNotOnline, fmt.Sprintf("consumer group %s has no live client on broker %s", h.ConsumerGroup, b.cfg.BrokerName))
		return
	}
	b.replyBody(w, req, cc)
}
