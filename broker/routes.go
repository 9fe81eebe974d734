package broker

import (
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// routes installs the handler table by request code.
func (b *Broker) routes() {
	s := b.server
	for code, h := range b.handlers() {
		s.Handle(code, h)
	}
	for _, code := range []int16{protocol.SendMessage, protocol.SendMessageV2, protocol.SendBatchMessage} {
		s.HandleInline(code, b.trySendInline)
	}
}

// handlers is the broker's handler table by request code: the one list
// routes installs and the in-process fuzz target drives.
func (b *Broker) handlers() map[int16]remoting.Handler {
	return map[int16]remoting.Handler{
		protocol.SendMessage:                      b.handleSend,
		protocol.SendMessageV2:                    b.handleSend,
		protocol.SendBatchMessage:                 b.handleSend,
		protocol.SendReplyMessage:                 b.handleSend,
		protocol.SendReplyMessageV2:               b.handleSend,
		protocol.PullMessage:                      b.handlePull,
		protocol.HeartBeat:                        b.handleHeartbeat,
		protocol.UnregisterClient:                 b.handleUnregisterClient,
		protocol.GetConsumerListByGroup:           b.handleConsumerList,
		protocol.QueryConsumerOffset:              b.handleQueryOffset,
		protocol.UpdateConsumerOffset:             b.handleUpdateOffset,
		protocol.GetMaxOffset:                     b.handleMaxOffset,
		protocol.GetMinOffset:                     b.handleMinOffset,
		protocol.SearchOffsetByTimestamp:          b.handleSearchOffset,
		protocol.InvokeBrokerToResetOffset:        b.handleResetOffset,
		protocol.GetEarliestMsgStoretime:          b.handleEarliestTime,
		protocol.LockBatchMQ:                      b.handleLock,
		protocol.UnlockBatchMQ:                    b.handleUnlock,
		protocol.ConsumerSendMsgBack:              b.handleSendBack,
		protocol.EndTransaction:                   b.handleEndTransaction,
		protocol.UpdateAndCreateTopic:             b.handleCreateTopic,
		protocol.DeleteTopicInBroker:              b.handleDeleteTopic,
		protocol.GetAllTopicConfig:                b.handleAllTopics,
		protocol.GetAllConsumerOffset:             b.handleAllConsumerOffsets,
		protocol.GetAllDelayOffset:                b.handleAllDelayOffsets,
		protocol.GetBrokerEpochCache:              b.handleEpochCache,
		protocol.AllowLogCut:                      b.handleAllowLogCut,
		protocol.PopStatus:                        b.handlePopStatus,
		protocol.ViewMessageByID:                  b.handleViewMessage,
		protocol.QueryMessage:                     b.handleQueryMessage,
		protocol.GetBrokerRuntimeInfo:             b.handleRuntimeInfo,
		protocol.GetTopicStatsInfo:                b.handleTopicStats,
		protocol.GetConsumeStats:                  b.handleConsumeStats,
		protocol.UpdateAndCreateSubscriptionGroup: b.handleUpdateSubGroup,
		protocol.GetAllSubscriptionGroupConfig:    b.handleAllSubGroups,
		protocol.DeleteSubscriptionGroup:          b.handleDeleteSubGroup,
		protocol.GetConsumerConnectionList:        b.handleConsumerConnections,
		protocol.GetProducerConnectionList:        b.handleProducerConnections,
		protocol.GetConsumerRunningInfo:           b.handleConsumerRunningInfo,
		protocol.ConsumeMessageDirectly:           b.handleConsumeMessageDirectly,
		protocol.InvokeBrokerToGetConsumerStatus:  b.handleGetConsumerStatus,
	}
}
