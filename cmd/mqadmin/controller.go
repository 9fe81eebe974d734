package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/nameserver/controller"
)

// Controller mode's commands (RocketMQ 5's mqadmin names and flags). The
// controllers come from -a "ip:port;ip:port"; without it, from the
// nameserver list (controllers running inside mqnamesrv --controller).

func controllerCommands(a *app) []*cobra.Command {
	var addrs string
	flag := func(cmd *cobra.Command) *cobra.Command {
		cmd.Flags().StringVarP(&addrs, "controllerAddress", "a", "",
			`controller addresses, "ip:port;ip:port" (default: the nameservers, -n)`)
		return cmd
	}
	return []*cobra.Command{
		flag(getControllerMetaDataCmd(a, &addrs)),
		flag(getSyncStateSetCmd(a, &addrs)),
		flag(electMasterCmd(a, &addrs)),
		allowLogCutCmd(a),
	}
}

// controllers returns the controller addresses and a client of them.
func (a *app) controllers(flag string) ([]string, *controller.Client, error) {
	addrs := controller.ParseAddrs(flag)
	if len(addrs) == 0 {
		ns, err := a.nameServers()
		if err != nil {
			return nil, nil, usagef("no controller: give -a ip:port (or -n, for controllers inside the nameservers)")
		}
		addrs = ns
	}
	for _, addr := range addrs {
		if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
			return nil, nil, usagef("controller %q is not ip:port", addr)
		}
	}
	cc := controller.ClientConfig{Addrs: addrs, Timeout: a.timeout, Logger: a.logger(), TLS: a.tlsConfig}
	if a.creds.AccessKey != "" {
		cc.Sign = sig.Signer(a.creds.AccessKey, a.creds.SecretKey, "")
	}
	cl, err := controller.NewClient(cc)
	if err != nil {
		return nil, nil, err
	}
	a.closers = append(a.closers, func() { cl.Close() })
	return addrs, cl, nil
}

// leaderWait bounds a request for the controllers' leader, which the
// client asks each controller for, again and again while they elect one:
// by --timeout for each of the n controllers, after which the command
// fails (no controller answered) instead of waiting for ever.
func (a *app) leaderWait(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout*time.Duration(max(n, 1)))
}

// controllerErr says which request failed and, for a controller's refusal,
// its code name and remark (the Error's text).
func controllerErr(what string, err error) error {
	var ce *controller.Error
	if errors.As(err, &ce) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: no controller answered (is one running at -a?): %w", what, err)
}

func getControllerMetaDataCmd(a *app, addrs *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "getControllerMetaData [-a ip:port;ip:port]",
		Short: "Show each controller's view of the Raft group: its leader and peers",
	}
	cmd.RunE = action(func(ctx context.Context, _ *cobra.Command) error {
		list, cl, err := a.controllers(*addrs)
		if err != nil {
			return err
		}
		type row struct {
			Address       string `json:"address"`
			IsLeader      bool   `json:"isLeader"`
			LeaderID      string `json:"controllerLeaderId"`
			LeaderAddress string `json:"controllerLeaderAddress"`
			Peers         string `json:"peers"`
			Error         string `json:"error,omitempty"`
		}
		var out []row
		answered := 0
		for _, addr := range list {
			md, err := cl.Metadata(ctx, addr)
			r := row{Address: addr, IsLeader: md.IsLeader, LeaderID: md.ControllerLeaderID,
				LeaderAddress: md.ControllerLeaderAddress, Peers: md.Peers}
			if err != nil {
				r.Error = err.Error()
			} else {
				answered++
			}
			out = append(out, r)
		}
		if answered == 0 {
			return controllerErr("CONTROLLER_GET_METADATA_INFO", errors.New(out[0].Error))
		}
		if a.json {
			return a.printJSON(out)
		}
		t := newTable(a.stdout, "Controller", "IsLeader", "LeaderId", "LeaderAddress", "Peers")
		for _, r := range out {
			if r.Error != "" {
				t.row(r.Address, unknown, unknown, unknown, "unreachable: "+r.Error)
				continue
			}
			t.row(r.Address, r.IsLeader, unknownIfEmpty(r.LeaderID), unknownIfEmpty(r.LeaderAddress), r.Peers)
		}
		return t.flush()
	})
	return cmd
}

// unknownIfEmpty is s, or "unknown" when empty.
func unknownIfEmpty(s string) string {
	if s == "" {
		return unknown
	}
	return s
}

func getSyncStateSetCmd(a *app, addrs *string) *cobra.Command {
	var names []string
	cmd := &cobra.Command{
		Use:   "getSyncStateSet -b BROKER_NAME [-a ip:port;ip:port]",
		Short: "Show a broker group's master, epochs and replicas in and out of the SyncStateSet",
	}
	cmd.Flags().StringSliceVarP(&names, "brokerName", "b", nil, "broker name (repeat or comma-separate for several)")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "brokerName"); err != nil {
			return err
		}
		names = slices.DeleteFunc(names, func(n string) bool { return strings.TrimSpace(n) == "" })
		if len(names) == 0 {
			return usagef("-b (--brokerName) names no broker")
		}
		list, cl, err := a.controllers(*addrs)
		if err != nil {
			return err
		}
		ctx, cancel := a.leaderWait(ctx, len(list))
		defer cancel()
		info, err := cl.SyncStateData(ctx, names)
		if err != nil {
			return controllerErr("CONTROLLER_GET_SYNC_STATE_DATA", err)
		}
		for _, n := range names {
			if _, ok := info.ReplicasInfoTable[n]; !ok {
				return fmt.Errorf("no broker group %q has registered with the controller", n)
			}
		}
		if a.json {
			return a.printJSON(info)
		}
		// NB: controller ids: a master's route id (clusterList's BID) is 0
		// whatever its controller id; clusterList shows both.
		t := newTable(a.stdout, "Broker", "Controller BrokerId", "Address", "Role", "InSync", "Alive", "MasterEpoch", "SyncStateSetEpoch")
		for _, n := range slices.Sorted(slices.Values(names)) {
			ri := info.ReplicasInfoTable[n]
			for _, rep := range append(slices.Clone(ri.InSyncReplicas), ri.NotInSyncReplicas...) {
				role := "SLAVE"
				if rep.BrokerID == ri.MasterBrokerID {
					role = "MASTER"
				}
				inSync := slices.ContainsFunc(ri.InSyncReplicas, func(r protocol.ReplicaIdentity) bool { return r.BrokerID == rep.BrokerID })
				t.row(n, rep.BrokerID, rep.BrokerAddress, role, inSync, rep.Alive, ri.MasterEpoch, ri.SyncStateSetEpoch)
			}
		}
		return t.flush()
	})
	return cmd
}

func electMasterCmd(a *app, addrs *string) *cobra.Command {
	var name string
	var id int64
	cmd := &cobra.Command{
		Use:   "electMaster -b BROKER_NAME -i BROKER_ID [-a ip:port;ip:port]",
		Short: "Make an in-sync replica the master of its group (a planned switchover)",
	}
	f := cmd.Flags()
	f.StringVarP(&name, "brokerName", "b", "", "broker name")
	f.Int64VarP(&id, "brokerId", "i", 0, "controller id of the replica to make master (see getSyncStateSet)")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "brokerName", "brokerId"); err != nil {
			return err
		}
		if id < 0 {
			return usagef("-i (--brokerId) %d is negative", id)
		}
		list, cl, err := a.controllers(*addrs)
		if err != nil {
			return err
		}
		ctx, cancel := a.leaderWait(ctx, len(list))
		defer cancel()
		role, err := cl.ElectMaster(ctx, name, id)
		if err != nil {
			return controllerErr("CONTROLLER_ELECT_MASTER", err)
		}
		if a.json {
			return a.printJSON(map[string]any{"brokerName": name, "masterBrokerId": role.MasterID,
				"masterAddress": role.MasterAddr, "masterEpoch": role.MasterEpoch, "syncStateSet": role.SyncStateSet})
		}
		fmt.Fprintf(a.stdout, "%s: broker %s (%s) is master, epoch %d\n", name, itoa(role.MasterID),
			role.MasterAddr, role.MasterEpoch)
		return nil
	})
	return cmd
}

// extFields is a request's ext fields as given.
type extFields map[string]string

func (e extFields) ToExt(m map[string]string) {
	for k, v := range e {
		m[k] = v
	}
}

func allowLogCutCmd(a *app) *cobra.Command {
	var brokerAddr string
	var offset int64
	cmd := &cobra.Command{
		Use:   "allowLogCut -b BROKER_ADDR [-o OFFSET]",
		Short: "Let a broker cut its log below what its group acknowledged, to follow its new master",
		Long: `A broker in controller mode refuses to cut its log below its confirmed offset (what its
group acknowledged) when the controllers elected a master that lacks it, logs why, and stays
out of the group. This lets it make that cut (down to -o OFFSET; default the cut it refused):
the acknowledged messages past the cut are lost from it. Save its store first to keep them.
brokerStatus shows confirmedOffset and refusedCutTo.`,
	}
	f := cmd.Flags()
	f.StringVarP(&brokerAddr, "brokerAddr", "b", "", "address of the broker that refused a cut (ip:port)")
	f.Int64VarP(&offset, "offset", "o", -1, "the lowest log end the broker may cut to (default: the cut it refused)")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "brokerAddr"); err != nil {
			return err
		}
		if host, port, err := net.SplitHostPort(brokerAddr); err != nil || host == "" || port == "" {
			return usagef("-b (--brokerAddr) %q is not ip:port", brokerAddr)
		}
		ext := extFields{}
		if cmd.Flags().Changed("offset") {
			if offset < 0 {
				return usagef("-o (--offset) %d is negative", offset)
			}
			ext["offset"] = strconv.FormatInt(offset, 10)
		}
		resp, err := a.call(ctx, "broker", brokerAddr, protocol.AllowLogCut, ext, nil)
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, resp.Remark)
		return nil
	})
	return cmd
}
