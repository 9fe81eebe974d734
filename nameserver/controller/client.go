package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Addrs are the controllers' remoting addresses (mqbroker --controller
	// "ip:port;ip:port;ip:port").
	Addrs []string
	// SerializeType of requests: msgpack (default) to Sluice, JSON to a
	// Java controller.
	SerializeType remoting.SerializeType
	// Timeout bounds one request to one controller (default 3 s). The
	// caller's context bounds the whole call, retries included.
	Timeout time.Duration
	// OnRoleChange, when set, receives every NOTIFY_BROKER_ROLE_CHANGED a
	// controller pushes over the connections heartbeats go on (a broker
	// belongs to one group, so the notice names none). It runs on a
	// remoting goroutine and must not block.
	OnRoleChange func(Role)
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Sign, when set, signs every request (ACL: the broker's or mqadmin's
	// account; controllers with ACL on take admin accounts only).
	Sign func(*remoting.Command)
	// TLS, when set, dials the controllers with TLS.
	TLS *tls.Config
}

// ParseAddrs splits "ip:port;ip:port" (the --controller flag).
func ParseAddrs(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Client calls controllers: what a broker in controller mode and mqadmin
// use. Writes and replica reads find the leader (following
// CONTROLLER_NOT_LEADER's answer, else trying each address) and retry
// until the context ends while no leader answers; heartbeats go to every
// controller. Safe for concurrent use.
type Client struct {
	cfg ClientConfig
	rc  *remoting.Client
	st  remoting.SerializeType // of requests

	mu     sync.Mutex
	leader string // guarded by mu: the last address that answered as leader
}

// retryEvery is the pause between rounds over every controller while none
// leads (an election takes about a second).
const retryEvery = 100 * time.Millisecond

// NewClient returns a client of cfg.Addrs; it dials lazily.
func NewClient(cfg ClientConfig) (*Client, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("controller: no controller addresses")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := remoting.DefaultClientOptions()
	if cfg.SerializeType != 0 {
		opts.SerializeType = cfg.SerializeType
	}
	opts.Logger = cfg.Logger
	opts.Sign, opts.TLS = cfg.Sign, cfg.TLS
	c := &Client{cfg: cfg, st: opts.SerializeType}
	if cfg.OnRoleChange != nil {
		opts.OnRequest = c.onRequest
	}
	c.rc = remoting.NewClient(opts)
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() error { return c.rc.Close() }

// onRequest serves what controllers push: NOTIFY_BROKER_ROLE_CHANGED.
func (c *Client) onRequest(_ context.Context, w remoting.ResponseWriter, req *remoting.Command) {
	if req.Code != protocol.NotifyBrokerRoleChanged {
		_ = w.Write(remoting.NewResponse(req, protocol.RequestCodeNotSupported,
			"controller client: request "+protocol.CodeName(req.Code)+" not served"))
		return
	}
	role, err := decodeRole(req)
	if err != nil {
		c.cfg.Logger.Warn("controller client: bad role change notice", "err", err)
		_ = w.Write(remoting.NewResponse(req, protocol.ControllerInvalidRequest, err.Error()))
		return
	}
	c.cfg.OnRoleChange(role)
	_ = w.Write(remoting.NewResponse(req, protocol.Success, ""))
}

// decodeRole reads a ControllerRoleHeader and, when there is one, a
// SyncStateSet body (NOTIFY_BROKER_ROLE_CHANGED, GET_REPLICA_INFO) or an
// ElectMasterResponseBody (ELECT_MASTER).
func decodeRole(cmd *remoting.Command) (Role, error) {
	var h protocol.ControllerRoleHeader
	if err := h.FromExt(cmd.ExtFields); err != nil {
		return Role{}, err
	}
	r := Role{BrokerID: h.BrokerID, MasterID: h.MasterBrokerID, MasterAddr: h.MasterAddress,
		MasterHAAddr: h.MasterHAAddress, MasterEpoch: h.MasterEpoch, SyncStateSetEpoch: h.SyncStateSetEpoch}
	if len(cmd.Body) > 0 {
		// NB: a response's code is its status, so an election's body is
		// told from a SyncStateSet by its shape (brokerMemberGroup).
		var eb protocol.ElectMasterResponseBody
		if err := remoting.DecodeBody(cmd.SerializeType, cmd.Body, &eb); err == nil && eb.BrokerMemberGroup != nil {
			r.SyncStateSet = eb.SyncStateSet
			return r, nil
		}
		set, err := DecodeSyncStateSet(cmd.SerializeType, cmd.Body)
		if err != nil {
			return Role{}, err
		}
		r.SyncStateSet, r.SyncStateSetEpoch = set.SyncStateSet, set.SyncStateSetEpoch
	}
	return r, nil
}

// call sends a request built by mk to one address.
func (c *Client) call(ctx context.Context, addr string, mk func() *remoting.Command) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	return c.rc.Invoke(ctx, addr, mk())
}

// toLeader sends the request to the leader and returns its answer (any
// code but CONTROLLER_NOT_LEADER).
func (c *Client) toLeader(ctx context.Context, mk func() *remoting.Command) (*remoting.Command, error) {
	var last error
	for {
		c.mu.Lock()
		order := slices.Clone(c.cfg.Addrs)
		if i := slices.Index(order, c.leader); i > 0 {
			order[0], order[i] = order[i], order[0]
		}
		c.mu.Unlock()
		for i := 0; i < len(order); i++ {
			addr := order[i]
			resp, err := c.call(ctx, addr, mk)
			if err != nil {
				last = err
				if ctx.Err() != nil {
					return nil, fmt.Errorf("%w: %w", ErrNoController, last)
				}
				continue
			}
			if resp.Code == protocol.ControllerNotLeader {
				last = &Error{Code: resp.Code, Remark: resp.Remark}
				// Ask the leader it names next, if it is not next anyway.
				if la := resp.ExtFields["controllerLeaderAddress"]; la != "" && la != addr {
					if j := slices.Index(order, la); j > i+1 {
						order[i+1], order[j] = order[j], order[i+1]
					} else if j < 0 {
						order = slices.Insert(order, i+1, la)
					}
				}
				continue
			}
			c.mu.Lock()
			c.leader = addr
			c.mu.Unlock()
			return resp, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNoController, last)
		case <-time.After(retryEvery):
		}
	}
}

// ok returns resp's refusal as an *Error, nil on SUCCESS.
func ok(resp *remoting.Command) error {
	if resp.Code == protocol.Success {
		return nil
	}
	return &Error{Code: resp.Code, Remark: resp.Remark}
}

func request(code int16, h protocol.ExtHeader) func() *remoting.Command {
	return func() *remoting.Command { return remoting.NewRequest(code, protocol.Ext(h), nil) }
}

// roleCall sends a request answered by a role header (and a SyncStateSet
// or ElectMasterResponseBody body).
func (c *Client) roleCall(ctx context.Context, mk func() *remoting.Command) (Role, error) {
	resp, err := c.toLeader(ctx, mk)
	if err != nil {
		return Role{}, err
	}
	if err := ok(resp); err != nil {
		return Role{}, err
	}
	return decodeRole(resp)
}

// Register joins the broker to its group and returns its id and role.
func (c *Client) Register(ctx context.Context, r Registration) (Role, error) {
	return c.roleCall(ctx, request(protocol.ControllerRegisterBroker, &protocol.ControllerRegisterBrokerRequestHeader{
		ClusterName: r.Cluster, BrokerName: r.Name, BrokerID: r.ID, BrokerAddress: r.Addr, HAAddress: r.HAAddr,
		InvokeTime: time.Now().UnixMilli(), LeaseMillis: r.Lease.Milliseconds()}))
}

// ReplicaInfo returns a group's role as the leader has it.
func (c *Client) ReplicaInfo(ctx context.Context, name string) (Role, error) {
	return c.roleCall(ctx, request(protocol.ControllerGetReplicaInfo, &protocol.GetReplicaInfoRequestHeader{BrokerName: name}))
}

// ElectMaster asks for a new master of name: id >= 0 designates it (a
// planned switchover), NoMaster lets the controller pick.
func (c *Client) ElectMaster(ctx context.Context, name string, id int64) (Role, error) {
	return c.roleCall(ctx, request(protocol.ControllerElectMaster, &protocol.ElectMasterRequestHeader{
		BrokerName: name, BrokerID: id, DesignateElect: id >= 0, InvokeTime: time.Now().UnixMilli()}))
}

// AlterSyncStateSet replaces name's SyncStateSet, as its master masterID of
// masterEpoch asks; setEpoch is the epoch of the set it last learnt. It
// returns the new set's epoch.
func (c *Client) AlterSyncStateSet(ctx context.Context, name string, masterID int64, masterEpoch int32,
	set []int64, setEpoch int32) (int32, error) {
	h := &protocol.AlterSyncStateSetRequestHeader{BrokerName: name, MasterBrokerID: masterID, MasterEpoch: masterEpoch,
		InvokeTime: time.Now().UnixMilli()}
	st := c.st
	body, err := remoting.EncodeBody(st, protocol.SyncStateSet{SyncStateSet: set, SyncStateSetEpoch: setEpoch})
	if err != nil {
		return 0, fmt.Errorf("controller: encode SyncStateSet: %w", err)
	}
	resp, err := c.toLeader(ctx, func() *remoting.Command {
		return remoting.NewRequest(protocol.ControllerAlterSyncStateSet, protocol.Ext(h), body)
	})
	if err != nil {
		return 0, err
	}
	if err := ok(resp); err != nil {
		return 0, err
	}
	var rh protocol.AlterSyncStateSetResponseHeader
	if err := rh.FromExt(resp.ExtFields); err != nil {
		return 0, fmt.Errorf("controller: %w", err)
	}
	return rh.NewSyncStateSetEpoch, nil
}

// HeartbeatAck is what a round of heartbeats learnt.
type HeartbeatAck struct {
	// Answered is how many controllers took the heartbeat.
	Answered int
	// LeaderAck reports whether the Raft leader was among them. A master
	// renews its lease by it (Sluice): while no leader acknowledges its
	// heartbeats, it may have been replaced. NB: any controller takes a
	// heartbeat, so Answered alone does not show a majority; a leader that
	// lost its majority steps down within Raft's leader lease.
	LeaderAck bool
	// Role is the group's role as the answering controllers have it, the
	// newest among them (Newer), the leader's on a tie; Known is false when
	// none had the group.
	Role  Role
	Known bool
}

// HeartbeatAnswer is one controller's answer to a heartbeat.
type HeartbeatAnswer struct {
	// Leader reports whether the controller answered as the Raft leader.
	Leader bool
	// Role is the group's role as that controller has it, with its
	// SyncStateSet; Known is false when it does not have the group.
	Role  Role
	Known bool
}

// Newer reports whether r is a later state of its group than o: a higher
// master epoch, or the same with a higher SyncStateSet epoch. Both only
// grow, and every controller's state is a prefix of the committed changes,
// so of two answers the newer one is the truth.
func (r Role) Newer(o Role) bool {
	if r.MasterEpoch != o.MasterEpoch {
		return r.MasterEpoch > o.MasterEpoch
	}
	return r.SyncStateSetEpoch > o.SyncStateSetEpoch
}

// Addrs returns the controllers' addresses (ClientConfig.Addrs).
func (c *Client) Addrs() []string { return slices.Clone(c.cfg.Addrs) }

func heartbeatHeader(h Heartbeat) *protocol.BrokerHeartbeatRequestHeader {
	return &protocol.BrokerHeartbeatRequestHeader{ClusterName: h.Cluster, BrokerAddr: h.Addr, BrokerName: h.Name,
		BrokerID: h.ID, Epoch: h.Epoch, MaxOffset: h.MaxOffset, HeartbeatTimeoutMillis: h.Timeout.Milliseconds(),
		ElectionPriority: h.Priority, LeaseMillis: h.Lease.Milliseconds(), Resign: h.Resign}
}

// HeartbeatTo sends h to the controller at addr alone. A broker heartbeats
// to each controller on its own, so that one that hangs delays no other's
// answer (and no master's lease).
func (c *Client) HeartbeatTo(ctx context.Context, addr string, h Heartbeat) (HeartbeatAnswer, error) {
	resp, err := c.call(ctx, addr, request(protocol.BrokerHeartbeat, heartbeatHeader(h)))
	if err != nil {
		return HeartbeatAnswer{}, err
	}
	if err := ok(resp); err != nil {
		return HeartbeatAnswer{}, err
	}
	a := HeartbeatAnswer{Leader: resp.ExtFields["isLeader"] == "true"}
	if _, has := resp.ExtFields["masterEpoch"]; !has {
		return a, nil
	}
	r, err := decodeRole(resp)
	if err != nil {
		return a, fmt.Errorf("controller: heartbeat answer from %s: %w", addr, err)
	}
	a.Role, a.Known = r, true
	return a, nil
}

// Heartbeat sends h to every controller at once (each keeps its own
// liveness table, so a new leader knows who is alive) and waits for every
// answer. It fails only when none took it.
func (c *Client) Heartbeat(ctx context.Context, h Heartbeat) (HeartbeatAck, error) {
	type answer struct {
		a   HeartbeatAnswer
		err error
	}
	answers := make([]answer, len(c.cfg.Addrs))
	var wg sync.WaitGroup
	for i, addr := range c.cfg.Addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := c.HeartbeatTo(ctx, addr, h)
			answers[i] = answer{a, err}
		}()
	}
	wg.Wait()
	var ack HeartbeatAck
	var errs []error
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		ack.Answered++
		ack.LeaderAck = ack.LeaderAck || a.a.Leader
		if a.a.Known && (!ack.Known || a.a.Role.Newer(ack.Role) || (a.a.Leader && !ack.Role.Newer(a.a.Role))) {
			ack.Role, ack.Known = a.a.Role, true
		}
	}
	if ack.Answered == 0 {
		return ack, fmt.Errorf("%w: %w", ErrNoController, errors.Join(errs...))
	}
	return ack, nil
}

// Resign tells every controller that broker id of name, master of epoch,
// has stopped taking sends and gives up being master (Sluice; a heartbeat
// with resign set), so that the leader elects another at once instead of
// waiting out its lease. The broker must have stopped acknowledging first:
// from this call on another may be elected. It fails unless the leader
// took it; the controllers then replace the master when its lease ran
// out, as when it dies.
func (c *Client) Resign(ctx context.Context, cluster, name string, id int64, epoch int32) error {
	ack, err := c.Heartbeat(ctx, Heartbeat{Cluster: cluster, Name: name, ID: id, Epoch: epoch, Resign: true})
	if err != nil {
		return err
	}
	if !ack.LeaderAck {
		return fmt.Errorf("%w: %d of %d controllers took the resignation, the leader not among them",
			ErrNoController, ack.Answered, len(c.cfg.Addrs))
	}
	return nil
}

// Metadata asks the controller at addr about the Raft group.
func (c *Client) Metadata(ctx context.Context, addr string) (protocol.GetMetaDataResponseHeader, error) {
	var h protocol.GetMetaDataResponseHeader
	resp, err := c.call(ctx, addr, func() *remoting.Command {
		return remoting.NewRequest(protocol.ControllerGetMetadataInfo, nil, nil)
	})
	if err != nil {
		return h, err
	}
	if err := ok(resp); err != nil {
		return h, err
	}
	return h, h.FromExt(resp.ExtFields)
}

// SyncStateData returns the named groups' replicas (every group when
// names is empty).
func (c *Client) SyncStateData(ctx context.Context, names []string) (protocol.BrokerReplicasInfo, error) {
	var info protocol.BrokerReplicasInfo
	var body []byte
	if len(names) > 0 {
		var err error
		if body, err = remoting.EncodeBody(c.st, names); err != nil {
			return info, err
		}
	}
	resp, err := c.toLeader(ctx, func() *remoting.Command {
		return remoting.NewRequest(protocol.ControllerGetSyncStateData, nil, body)
	})
	if err != nil {
		return info, err
	}
	if err := ok(resp); err != nil {
		return info, err
	}
	if err := remoting.DecodeBody(resp.SerializeType, resp.Body, &info); err != nil {
		return info, fmt.Errorf("controller: sync state data: %w", err)
	}
	return info, nil
}
