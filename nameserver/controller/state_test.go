package controller

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// seeded returns a state with group "b": members 1 (master), 2, 3, in sync
// {1, 2}, epochs 1 and 2.
func seeded(t testing.TB) *state {
	s := newState()
	for _, addr := range []string{"a:1", "a:2", "a:3"} {
		res := s.apply(&command{Op: opRegister, Register: &registerCmd{Cluster: "c", Name: "b", ID: NoMaster, Addr: addr}})
		require.Equal(t, int16(protocol.Success), res.Code, res.Remark)
	}
	res := s.apply(&command{Op: opAlter, Alter: &alterCmd{Name: "b", MasterID: 1, MasterEpoch: 1, SetEpoch: 1, NewSet: []int64{2, 1, 2}}})
	require.Equal(t, int16(protocol.Success), res.Code, res.Remark)
	return s
}

func TestState_Apply(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  command
		code int16
		want func(g *Group) bool
	}{
		{"alter ok", command{Op: opAlter, Alter: &alterCmd{Name: "b", MasterID: 1, MasterEpoch: 1, SetEpoch: 2, NewSet: []int64{1, 2, 3}}},
			protocol.Success, func(g *Group) bool { return slices.Equal(g.SyncStateSet, []int64{1, 2, 3}) && g.SyncStateSetEpoch == 3 }},
		{"alter stale master epoch", command{Op: opAlter, Alter: &alterCmd{Name: "b", MasterID: 1, MasterEpoch: 0, SetEpoch: 2, NewSet: []int64{1}}},
			protocol.ControllerFencedMasterEpoch, nil},
		{"alter stale set epoch", command{Op: opAlter, Alter: &alterCmd{Name: "b", MasterID: 1, MasterEpoch: 1, SetEpoch: 1, NewSet: []int64{1}}},
			protocol.ControllerFencedSyncStateSetEpoch, nil},
		{"alter by a non-master", command{Op: opAlter, Alter: &alterCmd{Name: "b", MasterID: 2, MasterEpoch: 1, SetEpoch: 2, NewSet: []int64{2}}},
			protocol.ControllerInvalidMaster, nil},
		{"alter leaving out the master", command{Op: opAlter, Alter: &alterCmd{Name: "b", MasterID: 1, MasterEpoch: 1, SetEpoch: 2, NewSet: []int64{2}}},
			protocol.ControllerInvalidReplicas, nil},
		{"alter with a stranger", command{Op: opAlter, Alter: &alterCmd{Name: "b", MasterID: 1, MasterEpoch: 1, SetEpoch: 2, NewSet: []int64{1, 7}}},
			protocol.ControllerInvalidReplicas, nil},
		{"alter unknown group", command{Op: opAlter, Alter: &alterCmd{Name: "x"}}, protocol.ControllerBrokerNeedToBeRegistered, nil},
		{"elect", command{Op: opElect, Elect: &electCmd{Name: "b", NewMaster: 2, ExpectEpoch: 1}},
			protocol.Success, func(g *Group) bool {
				return g.MasterID == 2 && g.MasterEpoch == 2 && slices.Equal(g.SyncStateSet, []int64{2}) && g.SyncStateSetEpoch == 3
			}},
		{"elect decided on a stale epoch", command{Op: opElect, Elect: &electCmd{Name: "b", NewMaster: 2, ExpectEpoch: 0}},
			protocol.ControllerFencedMasterEpoch, nil},
		{"elect a stranger", command{Op: opElect, Elect: &electCmd{Name: "b", NewMaster: 9, ExpectEpoch: 1}},
			protocol.ControllerInvalidMaster, nil},
		{"elect none", command{Op: opElect, Elect: &electCmd{Name: "b", NewMaster: NoMaster, ExpectEpoch: 1}},
			protocol.Success, func(g *Group) bool {
				return g.MasterID == NoMaster && g.MasterEpoch == 1 && slices.Equal(g.SyncStateSet, []int64{1, 2})
			}},
		{"register with a taken address", command{Op: opRegister, Register: &registerCmd{Name: "b", ID: 3, Addr: "a:1"}},
			protocol.ControllerBrokerIDInvalid, nil},
		{"register with an id moves it", command{Op: opRegister, Register: &registerCmd{Name: "b", ID: 3, Addr: "a:9"}},
			protocol.Success, func(g *Group) bool { return g.Members[3].Addr == "a:9" && g.NextID == 4 }},
		{"register a high id", command{Op: opRegister, Register: &registerCmd{Name: "b", ID: 10, Addr: "a:10"}},
			protocol.Success, func(g *Group) bool { return g.NextID == 11 && g.MasterID == 1 }},
		{"unknown op", command{Op: "drop"}, protocol.ControllerInvalidRequest, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := seeded(t)
			before := s.Groups["b"].clone()
			res := s.apply(&tc.cmd)
			require.Equal(t, tc.code, res.Code, res.Remark)
			if tc.want == nil {
				require.Equal(t, before, s.Groups["b"], "a refused command changes nothing")
				require.NotEmpty(t, res.Remark)
				return
			}
			require.True(t, tc.want(s.Groups["b"]), "%+v", s.Groups["b"])
		})
	}
}

func TestFSM_SnapshotRestore(t *testing.T) {
	f := newFSM()
	f.st = seeded(t)
	f.st.Nodes["n0"] = "127.0.0.1:9876"
	snap, err := f.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.(snapshot).Persist(&sink{Buffer: &buf}))
	g := newFSM()
	require.NoError(t, g.Restore(nopCloser{&buf}))
	require.Equal(t, f.st, g.st)

	for _, bad := range []string{"", "{", `{"groups":{"b":null}}`, `{"groups":{"b":{"name":"c"}}}`,
		`{"groups":{"b":{"name":"b","masterId":4,"members":{}}}}`} {
		_, err := decodeState(bytes.NewBufferString(bad))
		require.Error(t, err, bad)
	}
}

type sink struct{ *bytes.Buffer }

func (s *sink) ID() string    { return "test" }
func (s *sink) Cancel() error { return nil }
func (s *sink) Close() error  { return nil }

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

// checkInvariants fails when s breaks what the rest of the code relies on.
func checkInvariants(t *testing.T, s *state) {
	for name, g := range s.Groups {
		require.Equal(t, name, g.Name)
		if g.MasterID != NoMaster {
			require.Contains(t, g.Members, g.MasterID, "the master is a member")
			require.True(t, g.InSync(g.MasterID), "the master is in sync")
		}
		require.True(t, slices.IsSorted(g.SyncStateSet))
		for _, id := range g.SyncStateSet {
			require.Contains(t, g.Members, id)
		}
		for id := range g.Members {
			require.Less(t, id, g.NextID)
		}
	}
}

// FuzzApply applies fuzzed log entries (the JSON a leader proposes) to a
// seeded state: no panic, epochs never go back, invariants hold.
func FuzzApply(f *testing.F) {
	for _, c := range []command{
		{Op: opElect, Elect: &electCmd{Name: "b", NewMaster: 2, ExpectEpoch: 1}},
		{Op: opAlter, Alter: &alterCmd{Name: "b", MasterID: 1, MasterEpoch: 1, SetEpoch: 2, NewSet: []int64{1, 3}}},
		{Op: opRegister, Register: &registerCmd{Name: "b", ID: 5, Addr: "a:5"}},
		{Op: opRegister, Register: &registerCmd{Name: "n", ID: -1, Addr: "a:5"}},
		{Op: opAnnounce, Announce: &announceCmd{NodeID: "n1", Addr: "x:1"}},
	} {
		b, err := json.Marshal(c)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := seeded(t)
		before := s.Groups["b"].clone()
		fs := &fsm{st: s}
		for _, entry := range bytes.Split(data, []byte("\n")) {
			fs.Apply(&raft.Log{Data: entry})
		}
		checkInvariants(t, s)
		g := s.Groups["b"]
		require.GreaterOrEqual(t, g.MasterEpoch, before.MasterEpoch)
		require.GreaterOrEqual(t, g.SyncStateSetEpoch, before.SyncStateSetEpoch)
	})
}

// FuzzDecodeState feeds snapshot bytes to decodeState: an error or a state
// that keeps the invariants, never a panic.
func FuzzDecodeState(f *testing.F) {
	b, err := json.Marshal(seeded(f))
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte(`{"groups":{"b":{"name":"b","masterId":-1}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, g := range st.Groups {
			if g.MasterID != NoMaster {
				require.Contains(t, g.Members, g.MasterID)
			}
		}
	})
}
