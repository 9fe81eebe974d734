package broker

import "github.com/sluicemq/sluice/internal/protocol"

// routes installs the handler table by request code.
func (b *Broker) routes() {
	s := b.server
	s.Handle(protocol.SendMessage, b.handleSend)
	s.Handle(protocol.SendMessageV2, b.handleSend)
	s.Handle(protocol.SendBatchMessage, b.handleSend)
	s.Handle(protocol.SendReplyMessage, b.handleSend)
	s.Handle(protocol.SendReplyMessageV2, b.handleSend)
	for _, code := range []int16{protocol.SendMessage, protocol.SendMessageV2, protocol.SendBatchMessage} {
		s.HandleInline(code, b.trySendInline)
	}
	s.Handle(protocol.PullMessage, b.handlePull)
	s.Handle(protocol.HeartBeat, b.handleHeartbeat)
	s.Handle(protocol.UnregisterClient, b.handleUnregisterClient)
	s.Handle(protocol.GetConsumerListByGroup, b.handleConsumerList)
	s.Handle(protocol.QueryConsumerOffset, b.handleQueryOffset)
	s.Handle(protocol.UpdateConsumerOffset, b.handleUpdateOffset)
	s.Handle(protocol.GetMaxOffset, b.handleMaxOffset)
	s.Handle(protocol.GetMinOffset, b.handleMinOffset)
	s.Handle(protocol.SearchOffsetByTimestamp, b.handleSearchOffset)
	s.Handle(protocol.InvokeBrokerToResetOffset, b.handleResetOffset)
	s.Handle(protocol.GetEarliestMsgStoretime, b.handleEarliestTime)
	s.Handle(protocol.LockBatchMQ, b.handleLock)
	s.Handle(protocol.UnlockBatchMQ, b.handleUnlock)
	s.Handle(protocol.ConsumerSendMsgBack, b.handleSendBack)
	s.Handle(protocol.EndTransaction, b.handleEndTransaction)
	s.Handle(protocol.UpdateAndCreateTopic, b.handleCreateTopic)
	s.Handle(protocol.DeleteTopicInBroker, b.handleDeleteTopic)
	s.Handle(protocol.GetAllTopicConfig, b.handleAllTopics)
	s.Handle(protocol.GetAllConsumerOffset, b.handleAllConsumerOffsets)
	s.Handle(protocol.GetAllDelayOffset, b.handleAllDelayOffsets)
	s.Handle(protocol.GetBrokerEpochCache, b.handleEpochCache)
	s.Handle(protocol.ViewMessageByID, b.handleViewMessage)
	s.Handle(protocol.QueryMessage, b.handleQueryMessage)
	s.Handle(protocol.GetBrokerRuntimeInfo, b.handleRuntimeInfo)
	s.Handle(protocol.GetTopicStatsInfo, b.handleTopicStats)
	s.Handle(protocol.GetConsumeStats, b.handleConsumeStats)
	s.Handle(protocol.UpdateAndCreateSubscriptionGroup, b.handleUpdateSubGroup)
	s.Handle(protocol.GetAllSubscriptionGroupConfig, b.handleAllSubGroups)
	s.Handle(protocol.DeleteSubscriptionGroup, b.handleDeleteSubGroup)
	s.Handle(protocol.GetConsumerConnectionList, b.handleConsumerConnections)
	s.Handle(protocol.GetConsumerRunningInfo, b.handleConsumerRunningInfo)
	s.Handle(protocol.ConsumeMessageDirectly, b.handleConsumeMessageDirectly)
	s.Handle(protocol.InvokeBrokerToGetConsumerStatus, b.handleGetConsumerStatus)
}
