package protocol

// Controller mode (RocketMQ 5, RIP-44): the request and response codes,
// custom headers and bodies a broker, mqadmin and a controller exchange.
// Field names are those of the Java classes of rocketmq-all-5.3.3
// (remoting/protocol/header/controller/, body/SyncStateSet,
// body/BrokerReplicasInfo, header/namesrv/BrokerHeartbeatRequestHeader), so a
// Java broker can talk to Sluice's controller. Fields marked "Sluice" are
// additions a Java peer ignores.

// Controller request codes (RocketMQ 5 RequestCode).
const (
	BrokerHeartbeat             = 904  // broker → controller
	ControllerAlterSyncStateSet = 1001 // master → controller
	ControllerElectMaster       = 1002 // mqadmin electMaster, broker
	ControllerRegisterBroker    = 1003 // broker → controller
	ControllerGetReplicaInfo    = 1004 // broker → controller
	ControllerGetMetadataInfo   = 1005 // mqadmin getControllerMetaData, clients finding the leader
	ControllerGetSyncStateData  = 1006 // mqadmin getSyncStateSet
	NotifyBrokerRoleChanged     = 1008 // controller → broker
	ControllerGetNextBrokerID   = 1012 // not served
	ControllerApplyBrokerID     = 1013 // not served
)

// Controller response codes (RocketMQ 5 ResponseCode).
const (
	ControllerFencedMasterEpoch        = 2000
	ControllerFencedSyncStateSetEpoch  = 2001
	ControllerInvalidMaster            = 2002
	ControllerInvalidReplicas          = 2003
	ControllerMasterNotAvailable       = 2004
	ControllerInvalidRequest           = 2005
	ControllerBrokerNotAlive           = 2006
	ControllerNotLeader                = 2007
	ControllerBrokerMetadataNotExist   = 2008
	ControllerBrokerNeedToBeRegistered = 2010
	ControllerMasterStillExist         = 2011
	ControllerElectMasterFailed        = 2012
	ControllerAlterSyncStateSetFailed  = 2013
	ControllerBrokerIDInvalid          = 2014
)

// controllerRequestNames and controllerResponseNames join the code tables
// at init.
var (
	controllerRequestNames = map[int16]string{
		BrokerHeartbeat:             "BROKER_HEARTBEAT",
		ControllerAlterSyncStateSet: "CONTROLLER_ALTER_SYNC_STATE_SET",
		ControllerElectMaster:       "CONTROLLER_ELECT_MASTER",
		ControllerRegisterBroker:    "CONTROLLER_REGISTER_BROKER",
		ControllerGetReplicaInfo:    "CONTROLLER_GET_REPLICA_INFO",
		ControllerGetMetadataInfo:   "CONTROLLER_GET_METADATA_INFO",
		ControllerGetSyncStateData:  "CONTROLLER_GET_SYNC_STATE_DATA",
		NotifyBrokerRoleChanged:     "NOTIFY_BROKER_ROLE_CHANGED",
		ControllerGetNextBrokerID:   "CONTROLLER_GET_NEXT_BROKER_ID",
		ControllerApplyBrokerID:     "CONTROLLER_APPLY_BROKER_ID",
	}
	controllerResponseNames = map[int16]string{
		ControllerFencedMasterEpoch:        "CONTROLLER_FENCED_MASTER_EPOCH",
		ControllerFencedSyncStateSetEpoch:  "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH",
		ControllerInvalidMaster:            "CONTROLLER_INVALID_MASTER",
		ControllerInvalidReplicas:          "CONTROLLER_INVALID_REPLICAS",
		ControllerMasterNotAvailable:       "CONTROLLER_MASTER_NOT_AVAILABLE",
		ControllerInvalidRequest:           "CONTROLLER_INVALID_REQUEST",
		ControllerBrokerNotAlive:           "CONTROLLER_BROKER_NOT_ALIVE",
		ControllerNotLeader:                "CONTROLLER_NOT_LEADER",
		ControllerBrokerMetadataNotExist:   "CONTROLLER_BROKER_METADATA_NOT_EXIST",
		ControllerBrokerNeedToBeRegistered: "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED",
		ControllerMasterStillExist:         "CONTROLLER_MASTER_STILL_EXIST",
		ControllerElectMasterFailed:        "CONTROLLER_ELECT_MASTER_FAILED",
		ControllerAlterSyncStateSetFailed:  "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED",
		ControllerBrokerIDInvalid:          "CONTROLLER_BROKER_ID_INVALID",
	}
)

func init() {
	for code, name := range controllerRequestNames {
		requestNames[code] = name
	}
	for code, name := range controllerResponseNames {
		responseNames[code] = name
	}
}

// NoBrokerID stands for an absent (Java null) broker id: no master, or "pick
// one for me" in a registration or an election.
const NoBrokerID int64 = -1

// ControllerRegisterBrokerRequestHeader is CONTROLLER_REGISTER_BROKER
// (1003)'s header (Java RegisterBrokerToControllerRequestHeader). A missing
// or negative brokerId asks the controller to allocate the next free id.
type ControllerRegisterBrokerRequestHeader struct {
	ClusterName   string // clusterName
	BrokerName    string // brokerName
	BrokerID      int64  // brokerId; NoBrokerID when absent
	BrokerAddress string // brokerAddress: the broker's remoting address
	HAAddress     string // haAddress (Sluice): the broker's HA listen address
	InvokeTime    int64  // invokeTime, ms
	LeaseMillis   int64  // leaseMillis (Sluice): as BrokerHeartbeatRequestHeader's
}

// ToExt implements ExtHeader.
func (h *ControllerRegisterBrokerRequestHeader) ToExt(ext map[string]string) {
	ext["clusterName"] = h.ClusterName
	ext["brokerName"] = h.BrokerName
	putIf(ext, "brokerId", itoa64(h.BrokerID), h.BrokerID >= 0)
	ext["brokerAddress"] = h.BrokerAddress
	putOpt(ext, "haAddress", h.HAAddress)
	ext["invokeTime"] = itoa64(h.InvokeTime)
	putIf(ext, "leaseMillis", itoa64(h.LeaseMillis), h.LeaseMillis > 0)
}

// FromExt implements ExtHeader.
func (h *ControllerRegisterBrokerRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "RegisterBrokerToControllerRequestHeader", ext: ext}
	*h = ControllerRegisterBrokerRequestHeader{
		ClusterName:   r.str("clusterName"),
		BrokerName:    r.str("brokerName"),
		BrokerID:      optID(&r, "brokerId"),
		BrokerAddress: r.str("brokerAddress"),
		HAAddress:     r.optStr("haAddress"),
		InvokeTime:    r.optInt64("invokeTime"),
		LeaseMillis:   r.optInt64("leaseMillis"),
	}
	return r.err
}

// optID reads an optional broker id: NoBrokerID when absent, empty (Java
// null) or negative (no broker has one).
func optID(r *extReader, key string) int64 {
	if v, ok := r.get(key); !ok || v == "" {
		return NoBrokerID
	}
	if id := r.optInt64(key); id >= 0 {
		return id
	}
	return NoBrokerID
}

// ControllerRoleHeader is what a controller says about a group's master: the
// response header of CONTROLLER_REGISTER_BROKER, CONTROLLER_ELECT_MASTER and
// CONTROLLER_GET_REPLICA_INFO, and the request header of
// NOTIFY_BROKER_ROLE_CHANGED (Java RegisterBrokerToControllerResponseHeader,
// ElectMasterResponseHeader, GetReplicaInfoResponseHeader,
// NotifyBrokerRoleChangedRequestHeader share these names). With no master,
// masterBrokerId is absent and masterAddress empty.
type ControllerRoleHeader struct {
	ClusterName       string // clusterName (register only)
	BrokerName        string // brokerName (register only)
	MasterBrokerID    int64  // masterBrokerId; NoBrokerID: no master
	MasterAddress     string // masterAddress
	MasterHAAddress   string // masterHaAddress (Sluice)
	MasterEpoch       int32  // masterEpoch
	SyncStateSetEpoch int32  // syncStateSetEpoch
	BrokerID          int64  // brokerId (Sluice, register only): the id the broker registered as; NoBrokerID otherwise
}

// ToExt implements ExtHeader.
func (h *ControllerRoleHeader) ToExt(ext map[string]string) {
	putOpt(ext, "clusterName", h.ClusterName)
	putOpt(ext, "brokerName", h.BrokerName)
	putIf(ext, "masterBrokerId", itoa64(h.MasterBrokerID), h.MasterBrokerID >= 0)
	ext["masterAddress"] = h.MasterAddress
	putOpt(ext, "masterHaAddress", h.MasterHAAddress)
	ext["masterEpoch"] = itoa32(h.MasterEpoch)
	ext["syncStateSetEpoch"] = itoa32(h.SyncStateSetEpoch)
	putIf(ext, "brokerId", itoa64(h.BrokerID), h.BrokerID >= 0)
}

// FromExt implements ExtHeader.
func (h *ControllerRoleHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "ControllerRoleHeader", ext: ext}
	*h = ControllerRoleHeader{
		ClusterName:       r.optStr("clusterName"),
		BrokerName:        r.optStr("brokerName"),
		MasterBrokerID:    optID(&r, "masterBrokerId"),
		MasterAddress:     r.optStr("masterAddress"),
		MasterHAAddress:   r.optStr("masterHaAddress"),
		MasterEpoch:       r.optInt32("masterEpoch"),
		SyncStateSetEpoch: r.optInt32("syncStateSetEpoch"),
		BrokerID:          optID(&r, "brokerId"),
	}
	return r.err
}

// BrokerHeartbeatRequestHeader is BROKER_HEARTBEAT (904)'s header (Java
// namesrv/BrokerHeartbeatRequestHeader).
type BrokerHeartbeatRequestHeader struct {
	ClusterName            string // clusterName
	BrokerAddr             string // brokerAddr
	BrokerName             string // brokerName
	BrokerID               int64  // brokerId, required
	Epoch                  int32  // epoch: the last master epoch the broker knows
	MaxOffset              int64  // maxOffset: its commitlog end
	ConfirmOffset          int64  // confirmOffset
	HeartbeatTimeoutMillis int64  // heartbeatTimeoutMills (sic); 0: the controller's
	ElectionPriority       int32  // electionPriority
	// LeaseMillis (Sluice) is how long the broker, as master, goes on
	// acknowledging after it sent a heartbeat the controller leader
	// answered: a controller replaces it only once that long (and a
	// margin) passed since its last heartbeat, even when its connection
	// closed. 0 (a Java broker): no lease.
	LeaseMillis int64 // leaseMillis
	// Resign (Sluice): the broker stopped taking sends and gives up being
	// master (a graceful stop): it may be replaced at once.
	Resign bool // resign
}

func (h *BrokerHeartbeatRequestHeader) extLen() int { return 11 }

// ToExt implements ExtHeader.
func (h *BrokerHeartbeatRequestHeader) ToExt(ext map[string]string) {
	ext["clusterName"] = h.ClusterName
	ext["brokerAddr"] = h.BrokerAddr
	ext["brokerName"] = h.BrokerName
	ext["brokerId"] = itoa64(h.BrokerID)
	ext["epoch"] = itoa32(h.Epoch)
	ext["maxOffset"] = itoa64(h.MaxOffset)
	ext["confirmOffset"] = itoa64(h.ConfirmOffset)
	putIf(ext, "heartbeatTimeoutMills", itoa64(h.HeartbeatTimeoutMillis), h.HeartbeatTimeoutMillis > 0)
	ext["electionPriority"] = itoa32(h.ElectionPriority)
	putIf(ext, "leaseMillis", itoa64(h.LeaseMillis), h.LeaseMillis > 0)
	putIf(ext, "resign", "true", h.Resign)
}

// FromExt implements ExtHeader.
func (h *BrokerHeartbeatRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "BrokerHeartbeatRequestHeader", ext: ext}
	*h = BrokerHeartbeatRequestHeader{
		ClusterName:            r.optStr("clusterName"),
		BrokerAddr:             r.optStr("brokerAddr"),
		BrokerName:             r.str("brokerName"),
		BrokerID:               r.int64("brokerId"),
		Epoch:                  r.optInt32("epoch"),
		MaxOffset:              r.optInt64("maxOffset"),
		ConfirmOffset:          r.optInt64("confirmOffset"),
		HeartbeatTimeoutMillis: r.optInt64("heartbeatTimeoutMills"),
		ElectionPriority:       r.optInt32("electionPriority"),
		LeaseMillis:            r.optInt64("leaseMillis"),
		Resign:                 r.optBool("resign"),
	}
	return r.err
}

// ElectMasterRequestHeader is CONTROLLER_ELECT_MASTER (1002)'s header. With
// designateElect the controller makes brokerId the master (a planned
// switchover); without it, brokerId asks for an election it may win.
type ElectMasterRequestHeader struct {
	ClusterName    string // clusterName
	BrokerName     string // brokerName
	BrokerID       int64  // brokerId; NoBrokerID when absent
	DesignateElect bool   // designateElect
	InvokeTime     int64  // invokeTime, ms
}

// ToExt implements ExtHeader.
func (h *ElectMasterRequestHeader) ToExt(ext map[string]string) {
	ext["clusterName"] = h.ClusterName
	ext["brokerName"] = h.BrokerName
	ext["brokerId"] = itoa64(h.BrokerID)
	ext["designateElect"] = btoa(h.DesignateElect)
	ext["invokeTime"] = itoa64(h.InvokeTime)
}

// FromExt implements ExtHeader.
func (h *ElectMasterRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "ElectMasterRequestHeader", ext: ext}
	*h = ElectMasterRequestHeader{
		ClusterName:    r.optStr("clusterName"),
		BrokerName:     r.str("brokerName"),
		BrokerID:       optID(&r, "brokerId"),
		DesignateElect: r.optBool("designateElect"),
		InvokeTime:     r.optInt64("invokeTime"),
	}
	return r.err
}

// GetReplicaInfoRequestHeader is CONTROLLER_GET_REPLICA_INFO (1004)'s
// header.
type GetReplicaInfoRequestHeader struct {
	BrokerName string // brokerName
}

// ToExt implements ExtHeader.
func (h *GetReplicaInfoRequestHeader) ToExt(ext map[string]string) { ext["brokerName"] = h.BrokerName }

// FromExt implements ExtHeader.
func (h *GetReplicaInfoRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetReplicaInfoRequestHeader", ext: ext}
	h.BrokerName = r.str("brokerName")
	return r.err
}

// AlterSyncStateSetRequestHeader is CONTROLLER_ALTER_SYNC_STATE_SET
// (1001)'s header; the body is a SyncStateSet whose epoch is the one the
// master last learnt.
type AlterSyncStateSetRequestHeader struct {
	BrokerName     string // brokerName
	MasterBrokerID int64  // masterBrokerId
	MasterEpoch    int32  // masterEpoch
	InvokeTime     int64  // invokeTime, ms
}

// ToExt implements ExtHeader.
func (h *AlterSyncStateSetRequestHeader) ToExt(ext map[string]string) {
	ext["brokerName"] = h.BrokerName
	ext["masterBrokerId"] = itoa64(h.MasterBrokerID)
	ext["masterEpoch"] = itoa32(h.MasterEpoch)
	ext["invokeTime"] = itoa64(h.InvokeTime)
}

// FromExt implements ExtHeader.
func (h *AlterSyncStateSetRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "AlterSyncStateSetRequestHeader", ext: ext}
	*h = AlterSyncStateSetRequestHeader{
		BrokerName:     r.str("brokerName"),
		MasterBrokerID: r.int64("masterBrokerId"),
		MasterEpoch:    r.int32("masterEpoch"),
		InvokeTime:     r.optInt64("invokeTime"),
	}
	return r.err
}

// AlterSyncStateSetResponseHeader is the ext of a successful
// CONTROLLER_ALTER_SYNC_STATE_SET response.
type AlterSyncStateSetResponseHeader struct {
	NewSyncStateSetEpoch int32 // newSyncStateSetEpoch
}

// ToExt implements ExtHeader.
func (h *AlterSyncStateSetResponseHeader) ToExt(ext map[string]string) {
	ext["newSyncStateSetEpoch"] = itoa32(h.NewSyncStateSetEpoch)
}

// FromExt implements ExtHeader.
func (h *AlterSyncStateSetResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "AlterSyncStateSetResponseHeader", ext: ext}
	h.NewSyncStateSetEpoch = r.int32("newSyncStateSetEpoch")
	return r.err
}

// GetMetaDataResponseHeader is CONTROLLER_GET_METADATA_INFO (1005)'s
// response header: the Raft group, its leader, and whether the answering
// node is it. Addresses are remoting addresses.
type GetMetaDataResponseHeader struct {
	Group                   string // group
	ControllerLeaderID      string // controllerLeaderId
	ControllerLeaderAddress string // controllerLeaderAddress
	IsLeader                bool   // isLeader
	Peers                   string // peers: "n0=ip:port;n1=ip:port" (Raft addresses)
}

// ToExt implements ExtHeader.
func (h *GetMetaDataResponseHeader) ToExt(ext map[string]string) {
	ext["group"] = h.Group
	ext["controllerLeaderId"] = h.ControllerLeaderID
	ext["controllerLeaderAddress"] = h.ControllerLeaderAddress
	ext["isLeader"] = btoa(h.IsLeader)
	ext["peers"] = h.Peers
}

// FromExt implements ExtHeader.
func (h *GetMetaDataResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "GetMetaDataResponseHeader", ext: ext}
	*h = GetMetaDataResponseHeader{
		Group:                   r.optStr("group"),
		ControllerLeaderID:      r.optStr("controllerLeaderId"),
		ControllerLeaderAddress: r.optStr("controllerLeaderAddress"),
		IsLeader:                r.optBool("isLeader"),
		Peers:                   r.optStr("peers"),
	}
	return r.err
}

// SyncStateSet is the body of CONTROLLER_ALTER_SYNC_STATE_SET, of
// CONTROLLER_GET_REPLICA_INFO's response and of NOTIFY_BROKER_ROLE_CHANGED
// (Java body/SyncStateSet).
type SyncStateSet struct {
	SyncStateSet      []int64 `json:"syncStateSet" msgpack:"syncStateSet"`
	SyncStateSetEpoch int32   `json:"syncStateSetEpoch" msgpack:"syncStateSetEpoch"`
}

// ElectMasterResponseBody is CONTROLLER_ELECT_MASTER's response body.
type ElectMasterResponseBody struct {
	BrokerMemberGroup *BrokerMemberGroup `json:"brokerMemberGroup,omitempty" msgpack:"brokerMemberGroup,omitempty"`
	SyncStateSet      []int64            `json:"syncStateSet" msgpack:"syncStateSet"`
}

// BrokerMemberGroup is a group's members by id (Java body/BrokerMemberGroup).
type BrokerMemberGroup struct {
	Cluster     string           `json:"cluster" msgpack:"cluster"`
	BrokerName  string           `json:"brokerName" msgpack:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs" msgpack:"brokerAddrs"`
}

// BrokerReplicasInfo is CONTROLLER_GET_SYNC_STATE_DATA's response body: per
// broker name, its master and its replicas in and out of the SyncStateSet.
// The request body is a JSON (or msgpack) list of broker names.
type BrokerReplicasInfo struct {
	ReplicasInfoTable map[string]ReplicasInfo `json:"replicasInfoTable" msgpack:"replicasInfoTable"`
}

// ReplicasInfo is one group in BrokerReplicasInfo. MasterBrokerID is
// NoBrokerID when the group has no master.
type ReplicasInfo struct {
	MasterBrokerID    int64             `json:"masterBrokerId" msgpack:"masterBrokerId"`
	MasterAddress     string            `json:"masterAddress" msgpack:"masterAddress"`
	MasterEpoch       int32             `json:"masterEpoch" msgpack:"masterEpoch"`
	SyncStateSetEpoch int32             `json:"syncStateSetEpoch" msgpack:"syncStateSetEpoch"`
	InSyncReplicas    []ReplicaIdentity `json:"inSyncReplicas" msgpack:"inSyncReplicas"`
	NotInSyncReplicas []ReplicaIdentity `json:"notInSyncReplicas" msgpack:"notInSyncReplicas"`
}

// ReplicaIdentity is one replica in ReplicasInfo.
type ReplicaIdentity struct {
	BrokerName    string `json:"brokerName" msgpack:"brokerName"`
	BrokerID      int64  `json:"brokerId" msgpack:"brokerId"`
	BrokerAddress string `json:"brokerAddress" msgpack:"brokerAddress"`
	Alive         bool   `json:"alive" msgpack:"alive"`
}

// BrokerIDRequestHeader is the header of CONTROLLER_GET_NEXT_BROKER_ID
// (1012) and CONTROLLER_APPLY_BROKER_ID (1013), and their responses' (Java
// GetNextBrokerIdRequestHeader, ApplyBrokerIdRequestHeader and their
// responses): how a Java broker obtains its id before it registers.
// AppliedBrokerID and RegisterCheckCode ("address;timestamp") are APPLY's;
// NextBrokerID is GET_NEXT's answer.
type BrokerIDRequestHeader struct {
	ClusterName       string // clusterName
	BrokerName        string // brokerName
	AppliedBrokerID   int64  // appliedBrokerId; NoBrokerID when absent
	RegisterCheckCode string // registerCheckCode
	NextBrokerID      int64  // nextBrokerId; NoBrokerID when absent
}

// ToExt implements ExtHeader.
func (h *BrokerIDRequestHeader) ToExt(ext map[string]string) {
	ext["clusterName"] = h.ClusterName
	ext["brokerName"] = h.BrokerName
	putIf(ext, "appliedBrokerId", itoa64(h.AppliedBrokerID), h.AppliedBrokerID >= 0)
	putOpt(ext, "registerCheckCode", h.RegisterCheckCode)
	putIf(ext, "nextBrokerId", itoa64(h.NextBrokerID), h.NextBrokerID >= 0)
}

// FromExt implements ExtHeader.
func (h *BrokerIDRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{header: "BrokerIDRequestHeader", ext: ext}
	*h = BrokerIDRequestHeader{
		ClusterName:       r.optStr("clusterName"),
		BrokerName:        r.str("brokerName"),
		AppliedBrokerID:   optID(&r, "appliedBrokerId"),
		RegisterCheckCode: r.optStr("registerCheckCode"),
		NextBrokerID:      optID(&r, "nextBrokerId"),
	}
	return r.err
}
