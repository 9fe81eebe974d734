package protocol

// GetRouteInfoRequestHeader is the header of GET_ROUTEINFO_BY_TOPIC (105),
// spec §5.1.
type GetRouteInfoRequestHeader struct {
	Topic                  string // topic
	AcceptStandardJSONOnly bool   // acceptStandardJsonOnly, optional
	// WithGrpc (withGrpc, Sluice, optional) asks for each broker's gRPC
	// address in BrokerData.GrpcAddrs (RocketMQ 5 routes).
	WithGrpc bool
}

// ToExt implements ExtHeader.
func (h *GetRouteInfoRequestHeader) ToExt(ext map[string]string) {
	ext["topic"] = h.Topic
	putIf(ext, "acceptStandardJsonOnly", "true", h.AcceptStandardJSONOnly)
	putIf(ext, "withGrpc", "true", h.WithGrpc)
}

// FromExt implements ExtHeader.
func (h *GetRouteInfoRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetRouteInfoRequestHeader", ext: ext}
	*h = GetRouteInfoRequestHeader{
		Topic:                  r.str("topic"),
		AcceptStandardJSONOnly: r.optBool("acceptStandardJsonOnly"),
		WithGrpc:               r.optBool("withGrpc"),
	}
	return r.err
}

// brokerID is the (brokerName, brokerAddr, clusterName, brokerId) shape of
// UNREGISTER_BROKER and QUERY_DATA_VERSION.
type brokerID struct {
	BrokerName  string // brokerName
	BrokerAddr  string // brokerAddr: "ip:port" clients use
	ClusterName string // clusterName
	BrokerID    int64  // brokerId: 0 = master
}

func (h *brokerID) toExt(ext map[string]string) {
	ext["brokerName"] = h.BrokerName
	ext["brokerAddr"] = h.BrokerAddr
	ext["clusterName"] = h.ClusterName
	ext["brokerId"] = itoa64(h.BrokerID)
}

func (h *brokerID) read(r *extReader) {
	*h = brokerID{
		BrokerName:  r.str("brokerName"),
		BrokerAddr:  r.str("brokerAddr"),
		ClusterName: r.str("clusterName"),
		BrokerID:    r.int64("brokerId"),
	}
}

// RegisterBrokerRequestHeader is the header of REGISTER_BROKER (103),
// spec §5.2. The body is RegisterBrokerBody JSON.
type RegisterBrokerRequestHeader struct {
	BrokerName   string // brokerName
	BrokerAddr   string // brokerAddr: "ip:port" clients use
	ClusterName  string // clusterName
	HAServerAddr string // haServerAddr: "ip:haPort"
	BrokerID     int64  // brokerId: 0 = master
	Compressed   bool   // compressed, optional
	BodyCrc32    int32  // bodyCrc32, optional: 0 = do not check
	GrpcAddr     string // grpcAddr (Sluice), optional: "ip:port" of its RocketMQ 5 gRPC service
}

// ToExt implements ExtHeader.
func (h *RegisterBrokerRequestHeader) ToExt(ext map[string]string) {
	ext["brokerName"] = h.BrokerName
	ext["brokerAddr"] = h.BrokerAddr
	ext["clusterName"] = h.ClusterName
	ext["haServerAddr"] = h.HAServerAddr
	ext["brokerId"] = itoa64(h.BrokerID)
	ext["compressed"] = btoa(h.Compressed)
	ext["bodyCrc32"] = itoa32(h.BodyCrc32)
	putOpt(ext, "grpcAddr", h.GrpcAddr)
}

// FromExt implements ExtHeader.
func (h *RegisterBrokerRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "RegisterBrokerRequestHeader", ext: ext}
	*h = RegisterBrokerRequestHeader{
		BrokerName:   r.str("brokerName"),
		BrokerAddr:   r.str("brokerAddr"),
		ClusterName:  r.str("clusterName"),
		HAServerAddr: r.str("haServerAddr"),
		BrokerID:     r.int64("brokerId"),
		Compressed:   r.optBool("compressed"),
		BodyCrc32:    r.optInt32("bodyCrc32"),
		GrpcAddr:     r.optStr("grpcAddr"),
	}
	return r.err
}

// RegisterBrokerResponseHeader is the ext of a REGISTER_BROKER response:
// empty for a master, the master's addresses for a slave.
type RegisterBrokerResponseHeader struct {
	HAServerAddr string // haServerAddr, optional
	MasterAddr   string // masterAddr, optional
}

// ToExt implements ExtHeader.
func (h *RegisterBrokerResponseHeader) ToExt(ext map[string]string) {
	putOpt(ext, "haServerAddr", h.HAServerAddr)
	putOpt(ext, "masterAddr", h.MasterAddr)
}

// FromExt implements ExtHeader.
func (h *RegisterBrokerResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "RegisterBrokerResponseHeader", ext: ext}
	*h = RegisterBrokerResponseHeader{HAServerAddr: r.optStr("haServerAddr"), MasterAddr: r.optStr("masterAddr")}
	return r.err
}

// UnregisterBrokerRequestHeader is the header of UNREGISTER_BROKER (104),
// spec §5.3.
type UnregisterBrokerRequestHeader struct {
	BrokerName  string // brokerName
	BrokerAddr  string // brokerAddr
	ClusterName string // clusterName
	BrokerID    int64  // brokerId
}

// ToExt implements ExtHeader.
func (h *UnregisterBrokerRequestHeader) ToExt(ext map[string]string) { (*brokerID)(h).toExt(ext) }

// FromExt implements ExtHeader.
func (h *UnregisterBrokerRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "UnregisterBrokerRequestHeader", ext: ext}
	(*brokerID)(h).read(&r)
	return r.err
}

// QueryDataVersionRequestHeader is the header of QUERY_DATA_VERSION (322),
// spec §5.4. The body is the broker's DataVersion JSON.
type QueryDataVersionRequestHeader struct {
	BrokerName  string // brokerName
	BrokerAddr  string // brokerAddr
	ClusterName string // clusterName
	BrokerID    int64  // brokerId
}

// ToExt implements ExtHeader.
func (h *QueryDataVersionRequestHeader) ToExt(ext map[string]string) { (*brokerID)(h).toExt(ext) }

// FromExt implements ExtHeader.
func (h *QueryDataVersionRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "QueryDataVersionRequestHeader", ext: ext}
	(*brokerID)(h).read(&r)
	return r.err
}

// QueryDataVersionResponseHeader is the ext of a QUERY_DATA_VERSION
// response.
type QueryDataVersionResponseHeader struct {
	Changed bool // changed
}

// ToExt implements ExtHeader.
func (h *QueryDataVersionResponseHeader) ToExt(ext map[string]string) {
	ext["changed"] = btoa(h.Changed)
}

// FromExt implements ExtHeader.
func (h *QueryDataVersionResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "QueryDataVersionResponseHeader", ext: ext}
	h.Changed = r.boolean("changed")
	return r.err
}

// DeleteTopicFromNamesrvRequestHeader is the header of
// DELETE_TOPIC_IN_NAMESRV (216), spec §5.4.
type DeleteTopicFromNamesrvRequestHeader struct {
	Topic       string // topic
	ClusterName string // clusterName, optional: only that cluster's brokers
}

// ToExt implements ExtHeader.
func (h *DeleteTopicFromNamesrvRequestHeader) ToExt(ext map[string]string) {
	ext["topic"] = h.Topic
	putOpt(ext, "clusterName", h.ClusterName)
}

// FromExt implements ExtHeader.
func (h *DeleteTopicFromNamesrvRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "DeleteTopicFromNamesrvRequestHeader", ext: ext}
	*h = DeleteTopicFromNamesrvRequestHeader{Topic: r.str("topic"), ClusterName: r.optStr("clusterName")}
	return r.err
}

// GetTopicsByClusterRequestHeader is the header of GET_TOPICS_BY_CLUSTER
// (224), spec §5.4.
type GetTopicsByClusterRequestHeader struct {
	Cluster string // cluster
}

// ToExt implements ExtHeader.
func (h *GetTopicsByClusterRequestHeader) ToExt(ext map[string]string) { ext["cluster"] = h.Cluster }

// FromExt implements ExtHeader.
func (h *GetTopicsByClusterRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetTopicsByClusterRequestHeader", ext: ext}
	h.Cluster = r.str("cluster")
	return r.err
}

// OrderTopicConfigNamespace is the nameserver KV namespace of ordered
// topics' queue lists (RocketMQ's ORDER_TOPIC_CONFIG: topic →
// "brokerA:4;brokerB:4"). REGISTER_BROKER answers carry its table, and a
// route its topic's value when the nameserver's orderMessageEnable is on.
const OrderTopicConfigNamespace = "ORDER_TOPIC_CONFIG"

// KVConfigRequestHeader is the header of PUT_KV_CONFIG (100), GET_KV_CONFIG
// (101) and DELETE_KV_CONFIG (102), spec §5.4. Value is used by PUT only.
type KVConfigRequestHeader struct {
	Namespace string // namespace
	Key       string // key
	Value     string // value, optional
}

// ToExt implements ExtHeader.
func (h *KVConfigRequestHeader) ToExt(ext map[string]string) {
	ext["namespace"] = h.Namespace
	ext["key"] = h.Key
	putOpt(ext, "value", h.Value)
}

// FromExt implements ExtHeader.
func (h *KVConfigRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "KVConfigRequestHeader", ext: ext}
	*h = KVConfigRequestHeader{Namespace: r.str("namespace"), Key: r.str("key"), Value: r.optStr("value")}
	return r.err
}

// GetKVConfigResponseHeader is the ext of a successful GET_KV_CONFIG
// response.
type GetKVConfigResponseHeader struct {
	Value string // value
}

// ToExt implements ExtHeader.
func (h *GetKVConfigResponseHeader) ToExt(ext map[string]string) { ext["value"] = h.Value }

// FromExt implements ExtHeader.
func (h *GetKVConfigResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetKVConfigResponseHeader", ext: ext}
	h.Value = r.str("value")
	return r.err
}

// GetKVListByNamespaceRequestHeader is the header of
// GET_KVLIST_BY_NAMESPACE (219).
type GetKVListByNamespaceRequestHeader struct {
	Namespace string // namespace
}

// ToExt implements ExtHeader.
func (h *GetKVListByNamespaceRequestHeader) ToExt(ext map[string]string) {
	ext["namespace"] = h.Namespace
}

// FromExt implements ExtHeader.
func (h *GetKVListByNamespaceRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetKVListByNamespaceRequestHeader", ext: ext}
	h.Namespace = r.str("namespace")
	return r.err
}

// BrokerPermRequestHeader is the header of WIPE_WRITE_PERM_OF_BROKER (205)
// and ADD_WRITE_PERM_OF_BROKER (327).
type BrokerPermRequestHeader struct {
	BrokerName string // brokerName
}

// ToExt implements ExtHeader.
func (h *BrokerPermRequestHeader) ToExt(ext map[string]string) { ext["brokerName"] = h.BrokerName }

// FromExt implements ExtHeader.
func (h *BrokerPermRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "BrokerPermRequestHeader", ext: ext}
	h.BrokerName = r.str("brokerName")
	return r.err
}
