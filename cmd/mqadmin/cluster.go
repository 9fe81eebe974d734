package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/spf13/cobra"
)

func clusterCommands(a *app) []*cobra.Command {
	return []*cobra.Command{clusterListCmd(a), brokerStatusCmd(a), kvConfigCmd(a, false), kvConfigCmd(a, true)}
}

// runtimeInfo asks a broker for its runtime values (GET_BROKER_RUNTIME_INFO).
func (a *app) runtimeInfo(ctx context.Context, addr string) (map[string]string, error) {
	ad, err := a.adminClient()
	if err != nil {
		return nil, err
	}
	kv, err := ad.BrokerRuntimeInfo(ctx, addr)
	return kv, brokerErr(addr, protocol.GetBrokerRuntimeInfo, err)
}

// clusterRow is one broker address in clusterList.
type clusterRow struct {
	Cluster    string            `json:"cluster"`
	BrokerName string            `json:"brokerName"`
	BrokerID   int64             `json:"brokerId"`
	Addr       string            `json:"brokerAddr"`
	Runtime    map[string]string `json:"runtime,omitempty"`
	Error      string            `json:"error,omitempty"` // why Runtime is missing
}

// clusterColumns are the runtime values clusterList shows, by header.
var clusterColumns = []struct{ header, key string }{
	{"Role", "brokerRole"},
	{"HA Lag Bytes", "haLagBytes"},
	{"HA Lag s", "haLagSeconds"},
	{"HA State", "haState"},
	{"Put Total", "putMessageTotal"},
	{"Get Total", "getMessageTotal"},
	{"CommitLog Min", "commitLogMinOffset"},
	{"CommitLog Max", "commitLogMaxOffset"},
	{"Busy", "sendBusyTotal"},
	{"Epoch", "controllerEpoch"},
	// NB: in controller mode the route id (BID: 0 for the master of the
	// moment, else the controller's id) and the controller's own id
	// (getSyncStateSet's) differ for the master: both are shown.
	{"Ctl ID", "controllerBrokerId"},
}

func clusterListCmd(a *app) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:   "clusterList [-c CLUSTER]",
		Short: "List clusters, their brokers and addresses, with a few runtime values per broker",
	}
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "show only this cluster")
	cmd.RunE = action(func(ctx context.Context, _ *cobra.Command) error {
		ci, err := a.clusterInfo(ctx)
		if err != nil {
			return err
		}
		if cluster != "" {
			if _, ok := ci.Clusters[cluster]; !ok {
				return fmt.Errorf("the nameserver knows no cluster %q", cluster)
			}
		}
		var rows []clusterRow
		var errs []error
		for _, c := range slices.Sorted(maps.Keys(ci.Clusters)) {
			if cluster != "" && c != cluster {
				continue
			}
			names := slices.Clone(ci.Clusters[c])
			slices.Sort(names)
			for _, name := range names {
				b := ci.Brokers[name]
				for _, id := range slices.Sorted(maps.Keys(b.Addrs)) {
					r := clusterRow{Cluster: c, BrokerName: name, BrokerID: id, Addr: b.Addrs[id]}
					if r.Runtime, err = a.runtimeInfo(ctx, r.Addr); err != nil {
						r.Error = err.Error()
						errs = append(errs, err)
					}
					rows = append(rows, r)
				}
			}
		}
		joinSlaveLag(rows)
		if a.json {
			if err := a.printJSON(map[string]any{"brokers": nonNil(rows)}); err != nil {
				return err
			}
			return errors.Join(errs...)
		}
		headers := []string{"Cluster Name", "Broker Name", "BID", "Addr"}
		for _, c := range clusterColumns {
			headers = append(headers, c.header)
		}
		t := newTable(a.stdout, headers...)
		for _, r := range rows {
			cells := []any{r.Cluster, r.BrokerName, r.BrokerID, r.Addr}
			for _, c := range clusterColumns {
				v, ok := r.Runtime[c.key]
				switch {
				case r.Error != "":
					v = "unreachable"
				case !ok:
					v = "-"
				}
				cells = append(cells, v)
			}
			t.row(cells...)
		}
		if err := t.flush(); err != nil {
			return err
		}
		return errors.Join(errs...)
	})
	return cmd
}

func brokerStatusCmd(a *app) *cobra.Command {
	var brokerAddr, cluster string
	cmd := &cobra.Command{
		Use:   "brokerStatus (-b BROKER_ADDR | -c CLUSTER)",
		Short: "Show every runtime value of a broker, or of every master of a cluster",
	}
	cmd.Flags().StringVarP(&brokerAddr, "brokerAddr", "b", "", "broker address (ip:port)")
	cmd.Flags().StringVarP(&cluster, "clusterName", "c", "", "every master of this cluster")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := oneOf(cmd, "brokerAddr", "clusterName"); err != nil {
			return err
		}
		brokers, err := a.targets(ctx, brokerAddr, cluster)
		if err != nil {
			return err
		}
		type status struct {
			brokerRef
			Runtime map[string]string `json:"runtime"`
		}
		var out []status
		for _, b := range brokers {
			kv, err := a.runtimeInfo(ctx, b.Addr)
			if err != nil {
				return err
			}
			out = append(out, status{brokerRef: b, Runtime: kv})
		}
		if a.json {
			if brokerAddr != "" {
				return a.printJSON(out[0].Runtime)
			}
			return a.printJSON(out)
		}
		for i, s := range out {
			if cluster != "" {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				fmt.Fprintf(a.stdout, "== %s ==\n", brokerLabel(s.brokerRef))
			}
			t := newTable(a.stdout)
			for _, k := range slices.Sorted(maps.Keys(s.Runtime)) {
				t.row(k+":", s.Runtime[k])
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		return nil
	})
	return cmd
}

// haSlaveRE reads a master's haSlaveN runtime value.
var haSlaveRE = regexp.MustCompile(`^(\S+) acked=-?\d+ lagBytes=(-?\d+) lagSeconds=(-?[\d.]+)$`)

// joinSlaveLag gives each slave row the lag its master measures for it
// (the master knows a slave by its replication connection's address,
// haLocalAddr on the slave): bytes not acknowledged and the age of the
// oldest of them.
func joinSlaveLag(rows []clusterRow) {
	type lag struct{ bytes, secs string }
	byConn := map[string]lag{}
	for _, r := range rows {
		for k, v := range r.Runtime {
			if m := haSlaveRE.FindStringSubmatch(v); m != nil && strings.HasPrefix(k, "haSlave") {
				byConn[m[1]] = lag{m[2], m[3]}
			}
		}
	}
	for _, r := range rows {
		if l, ok := byConn[r.Runtime["haLocalAddr"]]; ok && r.Runtime["brokerRole"] == "SLAVE" {
			r.Runtime["haLagBytes"], r.Runtime["haLagSeconds"] = l.bytes, l.secs
		}
	}
}
