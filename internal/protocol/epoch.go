package protocol

// GetBrokerEpochCache (1007, RocketMQ 5's GET_BROKER_EPOCH_CACHE): a
// broker's epochs and log end, asked by a replica that joins it as master
// (controller mode) to find where their logs agree.
const GetBrokerEpochCache = 1007

// AllowLogCut (Sluice, mqadmin allowLogCut): an operator lets a broker in
// controller mode cut its log below its confirmed offset, which it refuses
// to do by itself (ext "offset": the lowest end it may cut to; absent: the
// cut it refused last). Admin-only under ACL.
const AllowLogCut = 31001

func init() {
	requestNames[GetBrokerEpochCache] = "GET_BROKER_EPOCH_CACHE"
	requestNames[AllowLogCut] = "ALLOW_LOG_CUT"
}
