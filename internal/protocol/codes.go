package protocol

import "strconv"

// Request codes (spec §2, RocketMQ 4.9.8 RequestCode). The comment after
// each code says who sends it: G = the official Go client, B→C = the broker
// to a client, NS = handled by the nameserver.
const (
	SendMessage                      = 10 // G
	PullMessage                      = 11 // G
	QueryMessage                     = 12 // mqadmin queryMsgByKey
	QueryBrokerOffset                = 13
	QueryConsumerOffset              = 14 // G
	UpdateConsumerOffset             = 15 // G
	UpdateAndCreateTopic             = 17 // G (admin), mqadmin updateTopic
	GetAllTopicConfig                = 21 // mqadmin, slave sync
	UpdateBrokerConfig               = 25 // mqadmin
	GetBrokerConfig                  = 26 // mqadmin
	GetBrokerRuntimeInfo             = 28 // mqadmin clusterList / brokerStatus
	SearchOffsetByTimestamp          = 29 // G
	GetMaxOffset                     = 30 // G
	GetMinOffset                     = 31 // Java clients
	GetEarliestMsgStoretime          = 32
	ViewMessageByID                  = 33 // mqadmin queryMsgById
	HeartBeat                        = 34 // G
	UnregisterClient                 = 35 // Java clients only
	ConsumerSendMsgBack              = 36 // G
	EndTransaction                   = 37 // G
	GetConsumerListByGroup           = 38 // G
	CheckTransactionState            = 39 // B→C
	NotifyConsumerIDsChanged         = 40 // B→C
	LockBatchMQ                      = 41 // G (orderly consumers)
	UnlockBatchMQ                    = 42 // G (orderly consumers)
	GetAllConsumerOffset             = 43
	GetAllDelayOffset                = 45
	CheckClientConfig                = 46  // Java clients, SQL92 only
	PutKVConfig                      = 100 // NS
	GetKVConfig                      = 101 // NS
	DeleteKVConfig                   = 102 // NS
	RegisterBroker                   = 103 // NS
	UnregisterBroker                 = 104 // NS
	GetRouteInfoByTopic              = 105 // NS, G
	GetBrokerClusterInfo             = 106 // NS
	UpdateAndCreateSubscriptionGroup = 200 // mqadmin updateSubGroup
	GetAllSubscriptionGroupConfig    = 201 // G (admin)
	GetTopicStatsInfo                = 202 // mqadmin topicStatus
	GetConsumerConnectionList        = 203 // mqadmin
	GetProducerConnectionList        = 204 // mqadmin
	WipeWritePermOfBroker            = 205 // NS
	GetAllTopicListFromNameServer    = 206 // NS, G (admin)
	DeleteSubscriptionGroup          = 207
	GetConsumeStats                  = 208 // mqadmin consumerProgress
	DeleteTopicInBroker              = 215 // G (admin)
	DeleteTopicInNamesrv             = 216 // NS, G (admin)
	GetKVListByNamespace             = 219 // NS
	ResetConsumerClientOffset        = 220 // B→C
	GetConsumerStatusFromClient      = 221 // B→C
	InvokeBrokerToResetOffset        = 222 // mqadmin
	InvokeBrokerToGetConsumerStatus  = 223 // mqadmin
	GetTopicsByCluster               = 224 // NS
	QueryTopicConsumeByWho           = 300
	GetSystemTopicListFromNS         = 304
	GetSystemTopicListFromBroker     = 305
	GetConsumerRunningInfo           = 307 // B→C (also mqadmin via the broker)
	ConsumeMessageDirectly           = 309 // B→C
	SendMessageV2                    = 310 // Java clients' default for single messages
	SendBatchMessage                 = 320 // G
	QueryDataVersion                 = 322 // NS
	SendReplyMessage                 = 324 // G, request-reply only
	SendReplyMessageV2               = 325 // G, request-reply only
	PushReplyMessageToClient         = 326 // B→C
	AddWritePermOfBroker             = 327 // NS
)

// Response codes (spec §1.4, RocketMQ 4.9.8 ResponseCode). They share the
// Code field with request codes and overlap numerically (10 is both
// SEND_MESSAGE and FLUSH_DISK_TIMEOUT); the command's response flag tells
// them apart.
const (
	Success                            = 0
	SystemError                        = 1
	SystemBusy                         = 2
	RequestCodeNotSupported            = 3
	TransactionFailed                  = 4
	FlushDiskTimeout                   = 10
	SlaveNotAvailable                  = 11
	FlushSlaveTimeout                  = 12
	MessageIllegal                     = 13
	ServiceNotAvailable                = 14
	VersionNotSupported                = 15
	NoPermission                       = 16
	TopicNotExist                      = 17
	TopicExistAlready                  = 18
	PullNotFound                       = 19
	PullRetryImmediately               = 20
	PullOffsetMoved                    = 21
	QueryNotFound                      = 22
	SubscriptionParseFailed            = 23
	SubscriptionNotExist               = 24
	SubscriptionNotLatest              = 25
	SubscriptionGroupNotExist          = 26
	FilterDataNotExist                 = 27
	FilterDataNotLatest                = 28
	TransactionShouldCommit            = 200
	TransactionShouldRollback          = 201
	TransactionStateUnknow             = 202 // sic, as RocketMQ spells it
	TransactionStateGroupWrong         = 203
	NoBuyerID                          = 204
	NotInCurrentUnit                   = 205
	ConsumerNotOnline                  = 206
	ConsumeMsgTimeout                  = 207
	NoMessage                          = 208
	UpdateAndCreateACLConfigFailed     = 209
	DeleteACLConfigFailed              = 210
	UpdateGlobalWhiteAddrsConfigFailed = 211
	FlowControl                        = 215
)

var requestNames = map[int16]string{
	SendMessage:                      "SEND_MESSAGE",
	PullMessage:                      "PULL_MESSAGE",
	QueryMessage:                     "QUERY_MESSAGE",
	QueryBrokerOffset:                "QUERY_BROKER_OFFSET",
	QueryConsumerOffset:              "QUERY_CONSUMER_OFFSET",
	UpdateConsumerOffset:             "UPDATE_CONSUMER_OFFSET",
	UpdateAndCreateTopic:             "UPDATE_AND_CREATE_TOPIC",
	GetAllTopicConfig:                "GET_ALL_TOPIC_CONFIG",
	UpdateBrokerConfig:               "UPDATE_BROKER_CONFIG",
	GetBrokerConfig:                  "GET_BROKER_CONFIG",
	GetBrokerRuntimeInfo:             "GET_BROKER_RUNTIME_INFO",
	SearchOffsetByTimestamp:          "SEARCH_OFFSET_BY_TIMESTAMP",
	GetMaxOffset:                     "GET_MAX_OFFSET",
	GetMinOffset:                     "GET_MIN_OFFSET",
	GetEarliestMsgStoretime:          "GET_EARLIEST_MSG_STORETIME",
	ViewMessageByID:                  "VIEW_MESSAGE_BY_ID",
	HeartBeat:                        "HEART_BEAT",
	UnregisterClient:                 "UNREGISTER_CLIENT",
	ConsumerSendMsgBack:              "CONSUMER_SEND_MSG_BACK",
	EndTransaction:                   "END_TRANSACTION",
	GetConsumerListByGroup:           "GET_CONSUMER_LIST_BY_GROUP",
	CheckTransactionState:            "CHECK_TRANSACTION_STATE",
	NotifyConsumerIDsChanged:         "NOTIFY_CONSUMER_IDS_CHANGED",
	LockBatchMQ:                      "LOCK_BATCH_MQ",
	UnlockBatchMQ:                    "UNLOCK_BATCH_MQ",
	GetAllConsumerOffset:             "GET_ALL_CONSUMER_OFFSET",
	GetAllDelayOffset:                "GET_ALL_DELAY_OFFSET",
	CheckClientConfig:                "CHECK_CLIENT_CONFIG",
	PutKVConfig:                      "PUT_KV_CONFIG",
	GetKVConfig:                      "GET_KV_CONFIG",
	DeleteKVConfig:                   "DELETE_KV_CONFIG",
	RegisterBroker:                   "REGISTER_BROKER",
	UnregisterBroker:                 "UNREGISTER_BROKER",
	GetRouteInfoByTopic:              "GET_ROUTEINFO_BY_TOPIC",
	GetBrokerClusterInfo:             "GET_BROKER_CLUSTER_INFO",
	UpdateAndCreateSubscriptionGroup: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
	GetAllSubscriptionGroupConfig:    "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
	GetTopicStatsInfo:                "GET_TOPIC_STATS_INFO",
	GetConsumerConnectionList:        "GET_CONSUMER_CONNECTION_LIST",
	GetProducerConnectionList:        "GET_PRODUCER_CONNECTION_LIST",
	WipeWritePermOfBroker:            "WIPE_WRITE_PERM_OF_BROKER",
	GetAllTopicListFromNameServer:    "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
	DeleteSubscriptionGroup:          "DELETE_SUBSCRIPTIONGROUP",
	GetConsumeStats:                  "GET_CONSUME_STATS",
	DeleteTopicInBroker:              "DELETE_TOPIC_IN_BROKER",
	DeleteTopicInNamesrv:             "DELETE_TOPIC_IN_NAMESRV",
	GetKVListByNamespace:             "GET_KVLIST_BY_NAMESPACE",
	ResetConsumerClientOffset:        "RESET_CONSUMER_CLIENT_OFFSET",
	GetConsumerStatusFromClient:      "GET_CONSUMER_STATUS_FROM_CLIENT",
	InvokeBrokerToResetOffset:        "INVOKE_BROKER_TO_RESET_OFFSET",
	InvokeBrokerToGetConsumerStatus:  "INVOKE_BROKER_TO_GET_CONSUMER_STATUS",
	GetTopicsByCluster:               "GET_TOPICS_BY_CLUSTER",
	QueryTopicConsumeByWho:           "QUERY_TOPIC_CONSUME_BY_WHO",
	GetSystemTopicListFromNS:         "GET_SYSTEM_TOPIC_LIST_FROM_NS",
	GetSystemTopicListFromBroker:     "GET_SYSTEM_TOPIC_LIST_FROM_BROKER",
	GetConsumerRunningInfo:           "GET_CONSUMER_RUNNING_INFO",
	ConsumeMessageDirectly:           "CONSUME_MESSAGE_DIRECTLY",
	SendMessageV2:                    "SEND_MESSAGE_V2",
	SendBatchMessage:                 "SEND_BATCH_MESSAGE",
	QueryDataVersion:                 "QUERY_DATA_VERSION",
	SendReplyMessage:                 "SEND_REPLY_MESSAGE",
	SendReplyMessageV2:               "SEND_REPLY_MESSAGE_V2",
	PushReplyMessageToClient:         "PUSH_REPLY_MESSAGE_TO_CLIENT",
	AddWritePermOfBroker:             "ADD_WRITE_PERM_OF_BROKER",
}

var responseNames = map[int16]string{
	Success:                            "SUCCESS",
	SystemError:                        "SYSTEM_ERROR",
	SystemBusy:                         "SYSTEM_BUSY",
	RequestCodeNotSupported:            "REQUEST_CODE_NOT_SUPPORTED",
	TransactionFailed:                  "TRANSACTION_FAILED",
	FlushDiskTimeout:                   "FLUSH_DISK_TIMEOUT",
	SlaveNotAvailable:                  "SLAVE_NOT_AVAILABLE",
	FlushSlaveTimeout:                  "FLUSH_SLAVE_TIMEOUT",
	MessageIllegal:                     "MESSAGE_ILLEGAL",
	ServiceNotAvailable:                "SERVICE_NOT_AVAILABLE",
	VersionNotSupported:                "VERSION_NOT_SUPPORTED",
	NoPermission:                       "NO_PERMISSION",
	TopicNotExist:                      "TOPIC_NOT_EXIST",
	TopicExistAlready:                  "TOPIC_EXIST_ALREADY",
	PullNotFound:                       "PULL_NOT_FOUND",
	PullRetryImmediately:               "PULL_RETRY_IMMEDIATELY",
	PullOffsetMoved:                    "PULL_OFFSET_MOVED",
	QueryNotFound:                      "QUERY_NOT_FOUND",
	SubscriptionParseFailed:            "SUBSCRIPTION_PARSE_FAILED",
	SubscriptionNotExist:               "SUBSCRIPTION_NOT_EXIST",
	SubscriptionNotLatest:              "SUBSCRIPTION_NOT_LATEST",
	SubscriptionGroupNotExist:          "SUBSCRIPTION_GROUP_NOT_EXIST",
	FilterDataNotExist:                 "FILTER_DATA_NOT_EXIST",
	FilterDataNotLatest:                "FILTER_DATA_NOT_LATEST",
	TransactionShouldCommit:            "TRANSACTION_SHOULD_COMMIT",
	TransactionShouldRollback:          "TRANSACTION_SHOULD_ROLLBACK",
	TransactionStateUnknow:             "TRANSACTION_STATE_UNKNOW",
	TransactionStateGroupWrong:         "TRANSACTION_STATE_GROUP_WRONG",
	NoBuyerID:                          "NO_BUYER_ID",
	NotInCurrentUnit:                   "NOT_IN_CURRENT_UNIT",
	ConsumerNotOnline:                  "CONSUMER_NOT_ONLINE",
	ConsumeMsgTimeout:                  "CONSUME_MSG_TIMEOUT",
	NoMessage:                          "NO_MESSAGE",
	UpdateAndCreateACLConfigFailed:     "UPDATE_AND_CREATE_ACL_CONFIG_FAILED",
	DeleteACLConfigFailed:              "DELETE_ACL_CONFIG_FAILED",
	UpdateGlobalWhiteAddrsConfigFailed: "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED",
	FlowControl:                        "FLOW_CONTROL",
}

// CodeName returns the RocketMQ name of a request code, such as
// "SEND_MESSAGE" for 10, or "REQUEST_CODE(n)" for a code not in the table.
// It is meant for logs and remarks.
func CodeName(code int16) string {
	if s, ok := requestNames[code]; ok {
		return s
	}
	return "REQUEST_CODE(" + strconv.Itoa(int(code)) + ")"
}

// ResponseCodeName returns the RocketMQ name of a response code, such as
// "PULL_NOT_FOUND" for 19, or "RESPONSE_CODE(n)" for a code not in the
// table.
func ResponseCodeName(code int16) string {
	if s, ok := responseNames[code]; ok {
		return s
	}
	return "RESPONSE_CODE(" + strconv.Itoa(int(code)) + ")"
}

// IsKnownRequestCode reports whether code is in the request code table.
func IsKnownRequestCode(code int16) bool {
	_, ok := requestNames[code]
	return ok
}
