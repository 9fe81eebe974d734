package nameserver

import (
	"context"
	"net"
	"strconv"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// handlerFunc serves one request and returns its reply. conn is the
// connection the request came over (nil in handler tests).
type handlerFunc func(conn *remoting.Conn, req *remoting.Command) *remoting.Command

// registerHandlers installs a handler per request code the nameserver
// serves; remoting answers any other code with REQUEST_CODE_NOT_SUPPORTED.
func (s *Server) registerHandlers() {
	for code, h := range map[int16]handlerFunc{
		protocol.PutKVConfig:                   s.putKVConfig,
		protocol.GetKVConfig:                   s.getKVConfig,
		protocol.DeleteKVConfig:                s.deleteKVConfig,
		protocol.RegisterBroker:                s.registerBroker,
		protocol.UnregisterBroker:              s.unregisterBroker,
		protocol.GetRouteInfoByTopic:           s.getRouteInfo,
		protocol.GetBrokerClusterInfo:          s.getBrokerClusterInfo,
		protocol.WipeWritePermOfBroker:         s.wipeWritePerm,
		protocol.GetAllTopicListFromNameServer: s.getAllTopicList,
		protocol.DeleteTopicInNamesrv:          s.deleteTopic,
		protocol.GetKVListByNamespace:          s.getKVList,
		protocol.GetTopicsByCluster:            s.getTopicsByCluster,
		protocol.QueryDataVersion:              s.queryDataVersion,
		protocol.AddWritePermOfBroker:          s.addWritePerm,
	} {
		s.rs.Handle(code, s.adapt(h))
	}
}

func (s *Server) adapt(h handlerFunc) remoting.Handler {
	return func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		if err := w.Write(h(w.Conn(), req)); err != nil {
			s.log.Debug("nameserver: reply not sent", "request", protocol.CodeName(req.Code), "err", err)
		}
	}
}

// registerBroker is REGISTER_BROKER (103), spec 5.2.
func (s *Server) registerBroker(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.RegisterBrokerRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if h.BodyCrc32 != 0 {
		if got := message.BodyCRC(req.Body); got != h.BodyCrc32 {
			return fail(req, protocol.SystemError,
				"nameserver: crc32 not match: header bodyCrc32 is %d, the %d-byte body has %d; resend the registration",
				h.BodyCrc32, len(req.Body), got)
		}
	}
	if h.Compressed {
		return fail(req, protocol.SystemError,
			"nameserver: compressed REGISTER_BROKER bodies are not supported; register with compressed=false")
	}
	if resp := checkBroker(req, h.BrokerName, h.BrokerAddr, h.ClusterName, h.BrokerID); resp != nil {
		return resp
	}
	r := registration{
		cluster:      h.ClusterName,
		brokerName:   h.BrokerName,
		brokerAddr:   h.BrokerAddr,
		haServerAddr: h.HAServerAddr,
		grpcAddr:     h.GrpcAddr,
		brokerID:     h.BrokerID,
	}
	// NB: Java registers a broker with an empty body too, leaving its queue
	// data alone; so does Sluice (r.topics stays nil).
	if len(req.Body) > 0 {
		w, resp := decodeTopicConfigs(req)
		if resp != nil {
			return resp
		}
		topics, err := checkTopicConfigs(w.TopicConfigTable)
		if err != "" {
			return fail(req, protocol.SystemError, "nameserver: REGISTER_BROKER: bad topic config table: %s", err)
		}
		r.topics, r.dataVersion = topics, w.DataVersion
	}
	var alive func() bool
	if conn != nil {
		r.connID = conn.ID()
		alive = func() bool { return !conn.Closed() }
	}
	res := s.routes.register(r, s.now(), alive)
	if !res.registered {
		// The reply cannot reach the broker; it registers again on its next
		// connection.
		return fail(req, protocol.SystemError, "nameserver: connection closed during registration; retry")
	}
	if res.first {
		s.log.Info("nameserver: broker registered", "broker", r.brokerName, "id", r.brokerID,
			"addr", r.brokerAddr, "cluster", r.cluster, "topics", len(r.topics))
	} else {
		s.log.Debug("nameserver: broker registration refreshed", "broker", r.brokerName,
			"addr", r.brokerAddr, "topics_updated", res.topicsUpdated)
	}
	resp := ok(req)
	resp.ExtFields = protocol.Ext(&protocol.RegisterBrokerResponseHeader{
		HAServerAddr: res.haServerAddr,
		MasterAddr:   res.masterAddr,
	})
	if table, found := s.kv.list(protocol.OrderTopicConfigNamespace); found {
		return withBody(req, resp, kvTable{Table: table})
	}
	return resp
}

// decodeTopicConfigs decodes a REGISTER_BROKER body: RegisterBrokerBody,
// or the bare TopicConfigSerializeWrapper that senders older than V3_0_11
// send.
func decodeTopicConfigs(req *remoting.Command) (protocol.TopicConfigSerializeWrapper, *remoting.Command) {
	if req.Version < protocol.Version3011 {
		var w protocol.TopicConfigSerializeWrapper
		return w, decodeBody(req, &w, "TopicConfigSerializeWrapper", maxRegisterValues)
	}
	var b protocol.RegisterBrokerBody
	return b.TopicConfigSerializeWrapper, decodeBody(req, &b, "RegisterBrokerBody", maxRegisterValues)
}

// checkTopicConfigs validates a registered topic table and returns it keyed
// by topic name, or what is wrong with it.
func checkTopicConfigs(table map[string]protocol.TopicConfig) (map[string]protocol.TopicConfig, string) {
	out := make(map[string]protocol.TopicConfig, len(table))
	for key, tc := range table {
		if tc.TopicName == "" {
			tc.TopicName = key
		}
		switch {
		case tc.TopicName == "":
			return nil, "a topic config has an empty topic name"
		case key != "" && key != tc.TopicName:
			return nil, "the entry " + strconv.Quote(key) + " holds the config of topic " + strconv.Quote(tc.TopicName)
		case tc.ReadQueueNums < 0 || tc.WriteQueueNums < 0:
			return nil, "topic " + strconv.Quote(tc.TopicName) + " has a negative queue count"
		}
		out[tc.TopicName] = tc
	}
	return out, ""
}

// checkBroker rejects registrations that would put unusable entries in
// routes: empty names, an address clients cannot dial, a negative id.
func checkBroker(req *remoting.Command, name, addr, cluster string, id int64) *remoting.Command {
	var problem string
	switch {
	case name == "":
		problem = "brokerName is empty"
	case cluster == "":
		problem = "clusterName is empty"
	case id < 0:
		problem = "brokerId " + strconv.FormatInt(id, 10) + " is negative"
	default:
		if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
			problem = "brokerAddr " + strconv.Quote(addr) + " is not ip:port"
		}
	}
	if problem != "" {
		return fail(req, protocol.SystemError, "nameserver: bad %s request: %s", protocol.CodeName(req.Code), problem)
	}
	return nil
}

// unregisterBroker is UNREGISTER_BROKER (104), spec 5.3.
func (s *Server) unregisterBroker(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.UnregisterBrokerRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if rb, found := s.routes.unregister(h.BrokerAddr); found {
		s.log.Info("nameserver: broker unregistered", "broker", rb.brokerName, "addr", rb.addr)
	}
	return ok(req)
}

// getRouteInfo is GET_ROUTEINFO_BY_TOPIC (105), spec 5.1.
func (s *Server) getRouteInfo(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetRouteInfoRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	rd, found := s.routes.routeWith(h.Topic, h.WithGrpc)
	if !found {
		return fail(req, protocol.TopicNotExist,
			"nameserver: no route for topic %q: no live broker has registered it; create the topic on a broker (or enable auto-create) and retry",
			h.Topic)
	}
	if s.cfg.OrderMessageEnable {
		rd.OrderTopicConf, _ = s.kv.get(protocol.OrderTopicConfigNamespace, h.Topic)
	}
	return withBody(req, ok(req), rd)
}

// getBrokerClusterInfo is GET_BROKER_CLUSTER_INFO (106).
func (s *Server) getBrokerClusterInfo(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return withBody(req, ok(req), s.routes.clusterInfo())
}

// getAllTopicList is GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206).
func (s *Server) getAllTopicList(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return withBody(req, ok(req), protocol.TopicList{TopicList: s.routes.topicList()})
}

// deleteTopic is DELETE_TOPIC_IN_NAMESRV (216): the topic's queue data
// goes, or only that of clusterName's brokers when given. Deleting an
// unknown topic succeeds. A broker that still has the topic puts it back
// with its next changed registration.
func (s *Server) deleteTopic(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.DeleteTopicFromNamesrvRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	n := s.routes.deleteTopic(h.Topic, h.ClusterName)
	s.log.Info("nameserver: topic deleted", "topic", h.Topic, "cluster", h.ClusterName, "brokers", n)
	return ok(req)
}

// getTopicsByCluster is GET_TOPICS_BY_CLUSTER (224).
func (s *Server) getTopicsByCluster(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetTopicsByClusterRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	return withBody(req, ok(req), protocol.TopicList{TopicList: s.routes.topicsByCluster(h.Cluster)})
}

// queryDataVersion is QUERY_DATA_VERSION (322): ext changed, and the
// nameserver's DataVersion for the address as body when it has one.
func (s *Server) queryDataVersion(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.QueryDataVersionRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	var dv protocol.DataVersion
	if resp := decodeBody(req, &dv, "DataVersion", maxSmallValues); resp != nil {
		return resp
	}
	changed, have, known := s.routes.queryDataVersion(h.BrokerAddr, dv, s.now())
	resp := ok(req)
	resp.ExtFields = protocol.Ext(&protocol.QueryDataVersionResponseHeader{Changed: changed})
	if known {
		return withBody(req, resp, have)
	}
	return resp
}

// wipeWritePerm is WIPE_WRITE_PERM_OF_BROKER (205).
func (s *Server) wipeWritePerm(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return s.setWritePerm(req, true, "wipeTopicCount")
}

// addWritePerm is ADD_WRITE_PERM_OF_BROKER (327).
func (s *Server) addWritePerm(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return s.setWritePerm(req, false, "addTopicCount")
}

func (s *Server) setWritePerm(req *remoting.Command, wipe bool, countKey string) *remoting.Command {
	var h protocol.BrokerPermRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	n := s.routes.setWritePerm(h.BrokerName, wipe)
	s.log.Info("nameserver: broker write permission changed", "broker", h.BrokerName, "wipe", wipe, "topics", n)
	resp := ok(req)
	resp.ExtFields = map[string]string{countKey: strconv.Itoa(n)}
	return resp
}

// putKVConfig is PUT_KV_CONFIG (100).
func (s *Server) putKVConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.KVConfigRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	s.kv.put(h.Namespace, h.Key, h.Value)
	return ok(req)
}

// getKVConfig is GET_KV_CONFIG (101): ext value, or QUERY_NOT_FOUND (22).
func (s *Server) getKVConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.KVConfigRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	v, found := s.kv.get(h.Namespace, h.Key)
	if !found {
		return fail(req, protocol.QueryNotFound, "nameserver: no KV config %q in namespace %q", h.Key, h.Namespace)
	}
	resp := ok(req)
	resp.ExtFields = protocol.Ext(&protocol.GetKVConfigResponseHeader{Value: v})
	return resp
}

// deleteKVConfig is DELETE_KV_CONFIG (102); deleting a missing key succeeds.
func (s *Server) deleteKVConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.KVConfigRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	s.kv.del(h.Namespace, h.Key)
	return ok(req)
}

// getKVList is GET_KVLIST_BY_NAMESPACE (219): {"table":{...}}, or
// QUERY_NOT_FOUND (22) for an empty namespace.
func (s *Server) getKVList(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetKVListByNamespaceRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	table, found := s.kv.list(h.Namespace)
	if !found {
		return fail(req, protocol.QueryNotFound, "nameserver: KV namespace %q is empty", h.Namespace)
	}
	return withBody(req, ok(req), kvTable{Table: table})
}
