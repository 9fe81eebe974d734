package protocol

// controllerHeaderCases are controller mode's headers, for the header
// table tests and FuzzExtFields.
func controllerHeaderCases() []headerCase {
	return []headerCase{
		{"RegisterBrokerToControllerRequestHeader", &ControllerRegisterBrokerRequestHeader{ClusterName: "c", BrokerName: "b",
			BrokerID: 2, BrokerAddress: "127.0.0.1:10911", HAAddress: "127.0.0.1:10912", InvokeTime: 1700000000000,
			LeaseMillis: 2000},
			func() ExtHeader { return new(ControllerRegisterBrokerRequestHeader) },
			[]string{"clusterName", "brokerName", "brokerAddress"}},
		{"ControllerRoleHeader", &ControllerRoleHeader{ClusterName: "c", BrokerName: "b", MasterBrokerID: 1,
			MasterAddress: "127.0.0.1:10911", MasterHAAddress: "127.0.0.1:10912", MasterEpoch: 3, SyncStateSetEpoch: 4, BrokerID: 2},
			func() ExtHeader { return new(ControllerRoleHeader) }, nil},
		{"BrokerHeartbeatRequestHeader", &BrokerHeartbeatRequestHeader{ClusterName: "c", BrokerAddr: "127.0.0.1:10911",
			BrokerName: "b", BrokerID: 1, Epoch: 2, MaxOffset: 1 << 40, ConfirmOffset: 5, HeartbeatTimeoutMillis: 10000, ElectionPriority: 1,
			LeaseMillis: 2000, Resign: true},
			func() ExtHeader { return new(BrokerHeartbeatRequestHeader) }, []string{"brokerName", "brokerId"}},
		{"ElectMasterRequestHeader", &ElectMasterRequestHeader{ClusterName: "c", BrokerName: "b", BrokerID: 2,
			DesignateElect: true, InvokeTime: 1},
			func() ExtHeader { return new(ElectMasterRequestHeader) }, []string{"brokerName"}},
		{"GetReplicaInfoRequestHeader", &GetReplicaInfoRequestHeader{BrokerName: "b"},
			func() ExtHeader { return new(GetReplicaInfoRequestHeader) }, []string{"brokerName"}},
		{"AlterSyncStateSetRequestHeader", &AlterSyncStateSetRequestHeader{BrokerName: "b", MasterBrokerID: 1, MasterEpoch: 2, InvokeTime: 3},
			func() ExtHeader { return new(AlterSyncStateSetRequestHeader) }, []string{"brokerName", "masterBrokerId", "masterEpoch"}},
		{"AlterSyncStateSetResponseHeader", &AlterSyncStateSetResponseHeader{NewSyncStateSetEpoch: 7},
			func() ExtHeader { return new(AlterSyncStateSetResponseHeader) }, []string{"newSyncStateSetEpoch"}},
		{"GetMetaDataResponseHeader", &GetMetaDataResponseHeader{Group: "g", ControllerLeaderID: "n1",
			ControllerLeaderAddress: "127.0.0.1:9878", IsLeader: true, Peers: "n0=127.0.0.1:9880;n1=127.0.0.1:9881"},
			func() ExtHeader { return new(GetMetaDataResponseHeader) }, nil},
		{"BrokerIDRequestHeader", &BrokerIDRequestHeader{ClusterName: "c", BrokerName: "b", AppliedBrokerID: 3,
			RegisterCheckCode: "127.0.0.1:10911;1700000000000", NextBrokerID: 4},
			func() ExtHeader { return new(BrokerIDRequestHeader) }, []string{"brokerName"}},
	}
}
