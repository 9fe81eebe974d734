package protocol

// GetBrokerEpochCache (1007, RocketMQ 5's GET_BROKER_EPOCH_CACHE): a
// broker's epochs and log end, asked by a replica that joins it as master
// (controller mode) to find where their logs agree.
const GetBrokerEpochCache = 1007

func init() { requestNames[GetBrokerEpochCache] = "GET_BROKER_EPOCH_CACHE" }
