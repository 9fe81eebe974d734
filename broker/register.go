package broker

import (
	"context"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// namesrvAddrs returns the nameservers to register with.
func (b *Broker) namesrvAddrs() []string {
	var out []string
	for _, a := range strings.Split(b.cfg.NamesrvAddr, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// registerLoop registers with every nameserver every register_interval
// (Start registers first; requests that create a topic register at once,
// registerNow).
// A slave that knows no master yet registers every masterLookupInterval
// (the answers name the master), not every register_interval: started
// beside its master, it waited up to 30 s, and a SYNC_MASTER refused every
// send meanwhile.
func (b *Broker) registerLoop() {
	defer b.wg.Done()
	t := time.NewTimer(b.registerWait())
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			return
		case <-t.C:
		}
		b.registerAll()
		t.Reset(b.registerWait())
	}
}

// masterLookupInterval is how often a slave without a master registers.
const masterLookupInterval = time.Second

// registerWait is the time to the next registration.
func (b *Broker) registerWait() time.Duration {
	if b.ctl == nil && b.cfg.IsSlave() && loadStr(&b.repl.masterHA) == "" {
		return min(b.cfg.RegisterInterval, masterLookupInterval)
	}
	return b.cfg.RegisterInterval
}

// registerAll sends REGISTER_BROKER with the whole topic table to every
// nameserver (spec 5.2). Registrations are serialised, so an older table
// never lands after a newer one, and none starts once the broker is
// closing (it would follow the unregistration).
func (b *Broker) registerAll() error {
	addrs := b.namesrvAddrs()
	if len(addrs) == 0 {
		return nil
	}
	b.regMu.Lock()
	defer b.regMu.Unlock()
	select {
	case <-b.quit:
		return nil
	default:
	}
	cfgs, version := b.topics.All()
	table := make(map[string]protocol.TopicConfig, len(cfgs))
	for _, c := range cfgs {
		table[c.TopicName] = c
	}
	body, err := remoting.EncodeBody(remoting.SerializeJSON, protocol.RegisterBrokerBody{
		TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{TopicConfigTable: table, DataVersion: version},
		FilterServerList:            []string{},
	})
	if err != nil {
		b.logger.Error("broker: encode registration", "err", err)
		return nil
	}
	h := protocol.RegisterBrokerRequestHeader{
		BrokerName: b.cfg.BrokerName, BrokerAddr: b.addr, ClusterName: b.cfg.ClusterName,
		HAServerAddr: b.repl.haAddr, BrokerID: b.registrationID(), BodyCrc32: int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF),
		GrpcAddr: b.grpcAddr,
	}
	var wg sync.WaitGroup
	refusals := make([]string, len(addrs)) // "": accepted, or failed for a reason that may pass
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			defer cancel()
			resp, err := b.nsc.Invoke(ctx, a, remoting.NewRequest(protocol.RegisterBroker, protocol.Ext(&h), body))
			switch {
			case err != nil:
				b.logger.Error("broker: register with nameserver failed: clients cannot find this broker through it",
					"namesrv", a, "err", err)
			case resp.Code != protocol.Success:
				why := registrationFix(resp)
				b.logger.Error("broker: nameserver refused the registration: clients cannot find this broker through it",
					"namesrv", a, "code", resp.Code, "remark", resp.Remark, "fix", why)
				if permanentRefusal(resp.Code, resp.Remark) {
					refusals[i] = fmt.Sprintf("nameserver %s: %s (%s)", a, resp.Remark, why)
				}
			default:
				b.learnMaster(resp)
			}
		}()
	}
	wg.Wait()
	for _, r := range refusals {
		if r == "" {
			return nil
		}
	}
	return fmt.Errorf("every nameserver refused the registration, for reasons a restart does not fix: %s", strings.Join(refusals, "; "))
}

// permanentRefusal reports whether a nameserver's refusal will be the same
// at the next registration: missing or wrong credentials, or TLS that the
// broker does not use towards it.
func permanentRefusal(code int16, remark string) bool {
	return code == protocol.NoPermission || (code == protocol.SystemError && remark == remoting.PlaintextRefusedRemark)
}

// registrationFix says what makes a nameserver take the registration.
func registrationFix(resp *remoting.Command) string {
	switch {
	case resp.Code == protocol.NoPermission:
		return "sign with an admin account of the nameserver's ACL: --access-key/--secret-key (acl.access_key, acl.secret_key)"
	case resp.Code == protocol.SystemError && resp.Remark == remoting.PlaintextRefusedRemark:
		return "the nameserver enforces TLS: --namesrv-tls, with --namesrv-tls-ca FILE or --namesrv-tls-insecure (namesrv_tls.*)"
	}
	return "see the remark"
}

// unregisterAll tells every nameserver the broker is leaving (best effort).
func (b *Broker) unregisterAll(ctx context.Context) {
	b.regMu.Lock()
	defer b.regMu.Unlock()
	h := protocol.UnregisterBrokerRequestHeader{BrokerName: b.cfg.BrokerName, BrokerAddr: b.addr,
		ClusterName: b.cfg.ClusterName, BrokerID: b.registrationID()}
	for _, a := range b.namesrvAddrs() {
		if _, err := b.nsc.Invoke(ctx, a, remoting.NewRequest(protocol.UnregisterBroker, protocol.Ext(&h), nil)); err != nil {
			b.logger.Debug("broker: unregister", "namesrv", a, "err", err)
		}
	}
}
