package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
)

// relayTimeout bounds a request a broker relays to a client: the broker
// waits up to 10 s for the client's answer.
const relayTimeout = 15 * time.Second

// relay sends r to the broker at addr, which relays it to a client,
// and returns the client's answer; it waits relayTimeout or the call
// timeout, whichever is longer.
func (a *Admin) relay(ctx context.Context, addr string, r request) ([]byte, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, max(a.cfg.callTimeout, relayTimeout))
	defer cancel()
	resp, err := a.core.tr.call(cctx, addr, r)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ConsumerRunningInfo asks the client clientID of group, through the broker
// at addr it is registered with, for its running info
// (GET_CONSUMER_RUNNING_INFO): its settings, subscriptions, queues with
// their cached messages, consume rates, and with jstack its goroutines.
func (a *Admin) ConsumerRunningInfo(ctx context.Context, addr, group, clientID string, jstack bool) (protocol.ConsumerRunningInfo, error) {
	body, err := a.relay(ctx, addr, request{code: protocol.GetConsumerRunningInfo, ext: protocol.Ext(
		&protocol.GetConsumerRunningInfoRequestHeader{ConsumerGroup: group, ClientID: clientID, JstackEnable: jstack})})
	if err != nil {
		return protocol.ConsumerRunningInfo{}, err
	}
	info, err := protocol.DecodeConsumerRunningInfo(body)
	if err != nil {
		return info, fmt.Errorf("client: %s of group %s answered with a running info that cannot be read: %w", clientID, group, err)
	}
	return info, nil
}

// ConsumeDirectly has the client clientID of group consume the message
// offsetMsgID again, through the broker that stores it
// (CONSUME_MESSAGE_DIRECTLY), and returns what its handler answered.
func (a *Admin) ConsumeDirectly(ctx context.Context, offsetMsgID, group, clientID string) (protocol.ConsumeMessageDirectlyResult, error) {
	var res protocol.ConsumeMessageDirectlyResult
	host, _, err := message.ParseOffsetMsgID(offsetMsgID)
	if err != nil {
		return res, err
	}
	body, err := a.relay(ctx, host.String(), request{code: protocol.ConsumeMessageDirectly, ext: protocol.Ext(
		&protocol.ConsumeMessageDirectlyRequestHeader{ConsumerGroup: group, ClientID: clientID, MsgID: offsetMsgID})})
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return res, fmt.Errorf("client: %s of group %s answered with a consume result that cannot be read: %w", clientID, group, err)
	}
	return res, nil
}
