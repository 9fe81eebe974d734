package main

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/client"
	"github.com/spf13/cobra"
)

func resendDLQCmd(a *app) *cobra.Command {
	var group, id string
	cmd := &cobra.Command{
		Use:   "resendDLQ -g GROUP -i MSG_ID",
		Short: "Send a message of %DLQ%<group> to %RETRY%<group>, so that the group consumes it again",
		Long: `Send a message of the dead-letter topic %DLQ%<group> to the group's retry topic
%RETRY%<group> on the same broker, with its reconsume count reset to 0: the
group's consumers receive it again, under its original topic (RETRY_TOPIC).

MSG_ID is the message's id (UNIQ_KEY, what consumers see) or the offset
message id of its copy in the DLQ. The DLQ copy stays where it is.`,
	}
	cmd.Flags().StringVarP(&group, "consumerGroup", "g", "", "consumer group")
	cmd.Flags().StringVarP(&id, "msgId", "i", "", "message id (UNIQ_KEY) or offset message id of the DLQ copy")
	cmd.RunE = action(func(ctx context.Context, cmd *cobra.Command) error {
		if err := required(cmd, "consumerGroup", "msgId"); err != nil {
			return err
		}
		ad, err := a.adminClient()
		if err != nil {
			return err
		}
		res, err := ad.ResendDLQ(ctx, group, id)
		if err != nil {
			return err
		}
		from, to := res.From, res.To
		if a.json {
			return a.printJSON(map[string]any{"group": group, "msgId": res.MsgID, "originalTopic": res.OriginalTopic,
				"previousReconsumeTimes": res.ReconsumeTimes, "from": from, "to": to})
		}
		holder := brokerLabel(brokerRef{Name: from.BrokerName, Addr: from.BrokerAddr})
		fmt.Fprintf(a.stdout, "resent message %s from %s (%s queue %d offset %d, offset msg id %s, reconsumed %d times)\n",
			orDash(res.MsgID), from.Topic, holder, from.QueueID, from.QueueOffset, from.OffsetMsgID, res.ReconsumeTimes)
		fmt.Fprintf(a.stdout, "  to %s (%s queue %d offset %d, offset msg id %s) with reconsume times reset to 0\n",
			to.Topic, holder, to.QueueID, to.QueueOffset, to.OffsetMsgID)
		fmt.Fprintf(a.stdout, "consumers of group %s will receive it again", group)
		if res.OriginalTopic != "" {
			fmt.Fprintf(a.stdout, " as a message of topic %s", res.OriginalTopic)
		}
		fmt.Fprintf(a.stdout, "; the copy in %s stays there\n", client.DLQTopic(group))
		return nil
	})
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
