package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// GroupName is the Raft group's name in CONTROLLER_GET_METADATA_INFO.
const GroupName = "sluice-controller"

// Front serves the controller's request codes on a remoting server: its
// own (Standalone, mqcontroller) or the nameserver's (mqnamesrv
// --controller). The node is attached after the server started, because
// the node announces the server's address; until then requests are
// refused with SYSTEM_BUSY.
type Front struct {
	node atomic.Pointer[Node]
	log  *slog.Logger
}

// NewFront returns a front with no node yet. A nil logger means
// slog.Default().
func NewFront(logger *slog.Logger) *Front {
	if logger == nil {
		logger = slog.Default()
	}
	return &Front{log: logger}
}

// Install registers the front's handlers with handle (a remoting.Server's
// Handle, before it starts).
func (f *Front) Install(handle func(code int16, h remoting.Handler)) {
	for code, h := range map[int16]func(*Node, *remoting.Conn, *remoting.Command) *remoting.Command{
		protocol.ControllerRegisterBroker:    f.register,
		protocol.BrokerHeartbeat:             f.heartbeat,
		protocol.ControllerGetReplicaInfo:    f.replicaInfo,
		protocol.ControllerAlterSyncStateSet: f.alterSyncStateSet,
		protocol.ControllerElectMaster:       f.electMaster,
		protocol.ControllerGetMetadataInfo:   f.metadata,
		protocol.ControllerGetSyncStateData:  f.syncStateData,
		protocol.ControllerGetNextBrokerID:   f.nextBrokerID,
		protocol.ControllerApplyBrokerID:     f.applyBrokerID,
	} {
		handle(code, f.adapt(h))
	}
}

// Attach makes the front serve n.
func (f *Front) Attach(n *Node) { f.node.Store(n) }

// ConnClosed is the remoting server's OnDisconnect hook: brokers that
// heartbeat over c are dead now.
func (f *Front) ConnClosed(c *remoting.Conn) {
	if n := f.node.Load(); n != nil {
		n.ConnClosed(c)
	}
}

func (f *Front) adapt(h func(*Node, *remoting.Conn, *remoting.Command) *remoting.Command) remoting.Handler {
	return func(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
		n := f.node.Load()
		var resp *remoting.Command
		if n == nil {
			resp = remoting.NewResponse(req, protocol.SystemBusy, "controller: starting; retry")
		} else {
			resp = h(n, w.Conn(), req)
		}
		if err := w.Write(resp); err != nil {
			f.log.Debug("controller: reply not sent", "request", protocol.CodeName(req.Code), "err", err)
		}
	}
}

// answer turns err into the response to req: a controller code with its
// remark, CONTROLLER_NOT_LEADER naming the leader, or SYSTEM_ERROR.
func answer(n *Node, req *remoting.Command, err error) *remoting.Command {
	var ce *Error
	switch {
	case errors.As(err, &ce):
		return remoting.NewResponse(req, ce.Code, ce.Remark)
	case errors.Is(err, ErrNotLeader):
		id, addr := n.Leader()
		remark := "controller: " + n.ID() + " is not the leader; no leader is known yet, retry"
		if addr != "" {
			remark = "controller: " + n.ID() + " is not the leader; send writes to " + id + " at " + addr
		}
		resp := remoting.NewResponse(req, protocol.ControllerNotLeader, remark)
		resp.ExtFields = map[string]string{"controllerLeaderId": id, "controllerLeaderAddress": addr}
		return resp
	}
	return remoting.NewResponse(req, protocol.SystemError, err.Error())
}

func invalid(req *remoting.Command, format string, args ...any) *remoting.Command {
	return remoting.NewResponse(req, protocol.ControllerInvalidRequest,
		fmt.Sprintf("controller: bad %s request: ", protocol.CodeName(req.Code))+fmt.Sprintf(format, args...))
}

// decodeHeader reads req's ext into h, or returns the refusal.
func decodeHeader(req *remoting.Command, h protocol.ExtHeader) *remoting.Command {
	if err := h.FromExt(req.ExtFields); err != nil {
		return invalid(req, "%v", err)
	}
	return nil
}

func withBody(req, resp *remoting.Command, v any) *remoting.Command {
	b, err := remoting.EncodeBody(req.SerializeType, v)
	if err != nil {
		return remoting.NewResponse(req, protocol.SystemError, "controller: cannot encode the reply body: "+err.Error())
	}
	resp.Body = b
	return resp
}

func roleReply(req *remoting.Command, r Role, h *protocol.ControllerRoleHeader) *remoting.Command {
	h.MasterBrokerID, h.MasterAddress, h.MasterHAAddress = r.MasterID, r.MasterAddr, r.MasterHAAddr
	h.MasterEpoch, h.SyncStateSetEpoch = r.MasterEpoch, r.SyncStateSetEpoch
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.ExtFields = protocol.Ext(h)
	return resp
}

func checkAddr(what, addr string, required bool) string {
	if addr == "" && !required {
		return ""
	}
	if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
		return what + " " + fmt.Sprintf("%q", addr) + " is not ip:port"
	}
	return ""
}

// register is CONTROLLER_REGISTER_BROKER (1003).
func (f *Front) register(n *Node, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ControllerRegisterBrokerRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	switch {
	case h.BrokerName == "" || h.ClusterName == "":
		return invalid(req, "clusterName and brokerName must not be empty")
	case checkAddr("brokerAddress", h.BrokerAddress, true) != "":
		return invalid(req, "%s", checkAddr("brokerAddress", h.BrokerAddress, true))
	case checkAddr("haAddress", h.HAAddress, false) != "":
		return invalid(req, "%s", checkAddr("haAddress", h.HAAddress, false))
	}
	role, err := n.Register(Registration{Cluster: h.ClusterName, Name: h.BrokerName, ID: h.BrokerID,
		Addr: h.BrokerAddress, HAAddr: h.HAAddress, Account: req.ExtFields[sig.FieldAccessKey], Lease: time.Duration(max(h.LeaseMillis, 0)) * time.Millisecond}, conn, req.SerializeType)
	if err != nil {
		return answer(n, req, err)
	}
	return roleReply(req, role, &protocol.ControllerRoleHeader{ClusterName: h.ClusterName, BrokerName: h.BrokerName,
		BrokerID: role.BrokerID})
}

// checkAccount refuses a heartbeat for a member that registered with an
// account from any other account: a member's liveness, and the
// connection its role notices go to, are its own.
func checkAccount(n *Node, req *remoting.Command, name string, id int64) *remoting.Command {
	g := n.Group(name)
	if g == nil {
		return nil
	}
	m, ok := g.Members[id]
	if key := req.ExtFields[sig.FieldAccessKey]; !ok || m.Account == "" || m.Account == key {
		return nil
	}
	return remoting.NewResponse(req, protocol.NoPermission, fmt.Sprintf(
		"controller: broker %d of %s registered with access key %q; a heartbeat for it must come from that account", id, name, m.Account))
}

// heartbeat is BROKER_HEARTBEAT (904). Every node takes it. The answer
// carries (Sluice, additive: a Java broker reads none of it) the group's
// role as this node knows it, in GET_REPLICA_INFO's header fields and
// with its SyncStateSet as body, so a broker that missed a notice learns
// of the change at its next heartbeat, and isLeader, so that a master can
// tell that the leader still hears it (its lease).
func (f *Front) heartbeat(n *Node, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.BrokerHeartbeatRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if h.BrokerName == "" || h.BrokerID < 0 {
		return invalid(req, "brokerName must not be empty and brokerId not negative")
	}
	if resp := checkAccount(n, req, h.BrokerName, h.BrokerID); resp != nil {
		return resp
	}
	g := n.Heartbeat(Heartbeat{Cluster: h.ClusterName, Name: h.BrokerName, ID: h.BrokerID, Addr: h.BrokerAddr,
		Epoch: h.Epoch, MaxOffset: h.MaxOffset, Timeout: time.Duration(max(h.HeartbeatTimeoutMillis, 0)) * time.Millisecond,
		Priority: h.ElectionPriority, Lease: time.Duration(max(h.LeaseMillis, 0)) * time.Millisecond, Resign: h.Resign},
		conn, req.SerializeType)
	resp := remoting.NewResponse(req, protocol.Success, "Heart beat success")
	if g != nil {
		// NB: the SyncStateSet as body, as GET_REPLICA_INFO's: a master
		// learns the set the controllers have from every answer.
		r := roleOf(g)
		resp = withBody(req, roleReply(req, r, &protocol.ControllerRoleHeader{BrokerID: NoMaster}),
			protocol.SyncStateSet{SyncStateSet: r.SyncStateSet, SyncStateSetEpoch: r.SyncStateSetEpoch})
		resp.Remark = "Heart beat success"
	} else {
		resp.ExtFields = map[string]string{}
	}
	resp.ExtFields["isLeader"] = strconv.FormatBool(n.IsLeader())
	return resp
}

// replicaInfo is CONTROLLER_GET_REPLICA_INFO (1004): the role in the
// header, the SyncStateSet as body.
func (f *Front) replicaInfo(n *Node, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetReplicaInfoRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	role, err := n.ReplicaInfo(h.BrokerName)
	if err != nil {
		return answer(n, req, err)
	}
	resp := roleReply(req, role, &protocol.ControllerRoleHeader{BrokerID: NoMaster})
	return withBody(req, resp, protocol.SyncStateSet{SyncStateSet: role.SyncStateSet, SyncStateSetEpoch: role.SyncStateSetEpoch})
}

// maxSetSize bounds a SyncStateSet in a request.
const maxSetSize = 1024

// bodySlack is the values a request body has besides its list (a
// SyncStateSet's map entries, JSON's brackets): the list's bound plus it
// bounds the values DecodeBodyMax lets be decoded. Decoding first and
// checking the length after took what a million Go values take (16 MiB
// of msgpack names decoded into 400 MiB).
const bodySlack = 16

// DecodeSyncStateSet reads a SyncStateSet body in codec st, refusing an
// empty body, negative ids and more than maxSetSize of them.
func DecodeSyncStateSet(st remoting.SerializeType, body []byte) (protocol.SyncStateSet, error) {
	var s protocol.SyncStateSet
	if len(body) == 0 {
		return s, errors.New("empty body, expected a SyncStateSet")
	}
	if err := remoting.DecodeBodyMax(st, body, &s, maxSetSize+bodySlack); err != nil {
		return s, fmt.Errorf("body is not a SyncStateSet: %w", err)
	}
	if len(s.SyncStateSet) > maxSetSize {
		return s, fmt.Errorf("the SyncStateSet has %d ids, more than %d", len(s.SyncStateSet), maxSetSize)
	}
	for _, id := range s.SyncStateSet {
		if id < 0 {
			return s, fmt.Errorf("the SyncStateSet holds the negative id %d", id)
		}
	}
	return s, nil
}

// alterSyncStateSet is CONTROLLER_ALTER_SYNC_STATE_SET (1001).
func (f *Front) alterSyncStateSet(n *Node, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.AlterSyncStateSetRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	set, err := DecodeSyncStateSet(req.SerializeType, req.Body)
	if err != nil {
		return invalid(req, "%v", err)
	}
	epoch, err := n.AlterSyncStateSet(h.BrokerName, h.MasterBrokerID, h.MasterEpoch, set.SyncStateSet, set.SyncStateSetEpoch)
	if err != nil {
		return answer(n, req, err)
	}
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.ExtFields = protocol.Ext(&protocol.AlterSyncStateSetResponseHeader{NewSyncStateSetEpoch: epoch})
	return resp
}

// electMaster is CONTROLLER_ELECT_MASTER (1002). brokerId names the new
// master only with designateElect (Java's rule); otherwise the controller
// picks. CONTROLLER_MASTER_STILL_EXIST carries the current role too.
func (f *Front) electMaster(n *Node, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ElectMasterRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	id := NoMaster
	if h.DesignateElect {
		if h.BrokerID < 0 {
			return invalid(req, "designateElect needs a brokerId")
		}
		id = h.BrokerID
	}
	role, err := n.ElectMaster(h.BrokerName, id)
	var ce *Error
	if err != nil && !(errors.As(err, &ce) && ce.Code == protocol.ControllerMasterStillExist) {
		return answer(n, req, err)
	}
	resp := roleReply(req, role, &protocol.ControllerRoleHeader{BrokerID: NoMaster})
	if ce != nil {
		resp.Code, resp.Remark = ce.Code, ce.Remark
	}
	body := protocol.ElectMasterResponseBody{SyncStateSet: role.SyncStateSet}
	if g := n.Group(h.BrokerName); g != nil {
		mg := &protocol.BrokerMemberGroup{Cluster: g.Cluster, BrokerName: g.Name, BrokerAddrs: map[int64]string{}}
		for id, m := range g.Members {
			mg.BrokerAddrs[id] = m.Addr
		}
		body.BrokerMemberGroup = mg
	}
	return withBody(req, resp, body)
}

// metadata is CONTROLLER_GET_METADATA_INFO (1005); every node answers.
func (f *Front) metadata(n *Node, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	id, addr := n.Leader()
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.ExtFields = protocol.Ext(&protocol.GetMetaDataResponseHeader{Group: GroupName, ControllerLeaderID: id,
		ControllerLeaderAddress: addr, IsLeader: n.IsLeader(), Peers: FormatPeers(n.Peers())})
	return resp
}

// maxNames bounds the broker names of one CONTROLLER_GET_SYNC_STATE_DATA.
const maxNames = 4096

// DecodeBrokerNames reads CONTROLLER_GET_SYNC_STATE_DATA's body, a list
// of broker names; an empty body is every group.
func DecodeBrokerNames(st remoting.SerializeType, body []byte) ([]string, error) {
	if len(body) == 0 {
		return nil, nil
	}
	var names []string
	if err := remoting.DecodeBodyMax(st, body, &names, maxNames+bodySlack); err != nil {
		return nil, fmt.Errorf("body is not a list of broker names: %w", err)
	}
	if len(names) > maxNames {
		return nil, fmt.Errorf("%d broker names, more than %d", len(names), maxNames)
	}
	return names, nil
}

// syncStateData is CONTROLLER_GET_SYNC_STATE_DATA (1006).
func (f *Front) syncStateData(n *Node, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	names, err := DecodeBrokerNames(req.SerializeType, req.Body)
	if err != nil {
		return invalid(req, "%v", err)
	}
	info, err := n.SyncStateData(names)
	if err != nil {
		return answer(n, req, err)
	}
	return withBody(req, remoting.NewResponse(req, protocol.Success, ""), info)
}

// nextBrokerID is CONTROLLER_GET_NEXT_BROKER_ID (1012).
func (f *Front) nextBrokerID(n *Node, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.BrokerIDRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	id, err := n.NextBrokerID(h.BrokerName)
	if err != nil {
		return answer(n, req, err)
	}
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.ExtFields = protocol.Ext(&protocol.BrokerIDRequestHeader{ClusterName: h.ClusterName, BrokerName: h.BrokerName,
		AppliedBrokerID: NoMaster, NextBrokerID: id})
	return resp
}

// applyBrokerID is CONTROLLER_APPLY_BROKER_ID (1013): a Java broker claims
// an id for the address in its registerCheckCode ("address;timestamp").
// It joins the group as CONTROLLER_REGISTER_BROKER would, but an id held by
// another address is refused.
func (f *Front) applyBrokerID(n *Node, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.BrokerIDRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	addr, _, _ := strings.Cut(h.RegisterCheckCode, ";")
	switch {
	case h.BrokerName == "" || h.ClusterName == "":
		return invalid(req, "clusterName and brokerName must not be empty")
	case h.AppliedBrokerID <= 0:
		return invalid(req, "appliedBrokerId must be a positive id")
	case checkAddr("registerCheckCode's address", addr, true) != "":
		return invalid(req, "%s", checkAddr("registerCheckCode's address", addr, true))
	}
	_, err := n.Register(Registration{Cluster: h.ClusterName, Name: h.BrokerName, ID: h.AppliedBrokerID, Addr: addr,
		Apply: true, Account: req.ExtFields[sig.FieldAccessKey]}, conn, req.SerializeType)
	if err != nil {
		return answer(n, req, err)
	}
	resp := remoting.NewResponse(req, protocol.Success, "")
	resp.ExtFields = protocol.Ext(&protocol.BrokerIDRequestHeader{ClusterName: h.ClusterName, BrokerName: h.BrokerName,
		AppliedBrokerID: NoMaster, NextBrokerID: NoMaster})
	return resp
}
