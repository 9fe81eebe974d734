package main

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/spf13/cobra"
)

// kvConfigCmd is updateKvConfig (PUT_KV_CONFIG) or, with del,
// deleteKvConfig (DELETE_KV_CONFIG), on every nameserver.
func kvConfigCmd(a *app, del bool) *cobra.Command {
	var namespace, key, value string
	cmd := &cobra.Command{
		Use:   "updateKvConfig -s NAMESPACE -k KEY -v VALUE",
		Short: "Set a nameserver KV config entry (e.g. -s ORDER_TOPIC_CONFIG -k TOPIC -v brokerA:8;brokerB:8) on every nameserver",
	}
	code, verb := int16(protocol.PutKVConfig), "set"
	if del {
		cmd.Use, cmd.Short = "deleteKvConfig -s NAMESPACE -k KEY", "Delete a nameserver KV config entry on every nameserver"
		code, verb = protocol.DeleteKVConfig, "deleted"
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "s", "", "namespace, e.g. ORDER_TOPIC_CONFIG")
	f.StringVarP(&key, "key", "k", "", "key")
	if !del {
		f.StringVarP(&value, "value", "v", "", "value")
	}
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		names := []string{"namespace", "key"}
		if !del {
			names = append(names, "value")
		}
		if err := required(cmd, names...); err != nil {
			return err
		}
		if err := notBlank(cmd, "namespace", "key"); err != nil {
			return err
		}
		ns, err := a.nameServers()
		if err != nil {
			return err
		}
		h := &protocol.KVConfigRequestHeader{Namespace: namespace, Key: key, Value: value}
		for i, addr := range ns {
			if _, err := a.call(ctx, "nameserver", addr, code, h, nil); err != nil {
				if i > 0 {
					return fmt.Errorf("%w (already %s on %v)", err, verb, ns[:i])
				}
				return err
			}
		}
		if a.json {
			return a.printJSON(map[string]any{"namespace": namespace, "key": key, "value": value, "deleted": del,
				"nameservers": ns})
		}
		fmt.Fprintf(a.stdout, "%s %s %s on %d nameserver(s)\n", namespace, key, verb, len(ns))
		return nil
	})
	return cmd
}
