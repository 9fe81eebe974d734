package acl

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/sluicemq/sluice/internal/acl/sig"
	"github.com/sluicemq/sluice/internal/protocol"
)

// Request is what Check reads of a request.
type Request struct {
	Code   int16
	Remote netip.Addr
	Ext    map[string]string
	Body   []byte
	// DecodeBody decodes Body in the request's body codec into v; Check
	// calls it for HEART_BEAT only. Nil: heartbeat bodies are not read.
	DecodeBody func(v any) error
}

// Refusal reasons (the label values of the refusal metrics).
const (
	ReasonNoCredentials = "no_credentials"
	ReasonUnknownKey    = "unknown_key"
	ReasonAddress       = "address"
	ReasonSignature     = "bad_signature"
	ReasonAdmin         = "admin_required"
	ReasonPermission    = "permission"
)

// Reasons lists every refusal reason, in a fixed order.
var Reasons = [...]string{ReasonNoCredentials, ReasonUnknownKey, ReasonAddress, ReasonSignature, ReasonAdmin, ReasonPermission}

// Refusal says why Check refused a request.
type Refusal struct {
	Reason string // one of Reasons
	Key    string // the request's access key, "" when it had none
	Remark string // for the NO_PERMISSION answer: key, resource, permission; never a secret
}

// Resource is one thing a request touches and what it needs on it.
type Resource struct {
	Name string // a topic, or %RETRY%group for a group
	Need Perm
}

// adminCodes need an admin account: the Java broker's list (topic and
// subscription-group create and delete, broker config), and what Sluice
// adds: the nameserver's topic delete and KV writes (Java's 4.x nameserver
// checks nothing), broker registration and write-permission changes (they
// change routes), offset resets through the broker, and every controller
// code (they elect masters and decide what replicas keep: a stranger
// could otherwise register a fake member, have it elected and make every
// real broker cut its log).
var adminCodes = map[int16]bool{
	protocol.UpdateAndCreateTopic:             true,
	protocol.UpdateBrokerConfig:               true,
	protocol.DeleteTopicInBroker:              true,
	protocol.UpdateAndCreateSubscriptionGroup: true,
	protocol.DeleteSubscriptionGroup:          true,
	protocol.DeleteTopicInNamesrv:             true,
	protocol.PutKVConfig:                      true,
	protocol.DeleteKVConfig:                   true,
	protocol.RegisterBroker:                   true,
	protocol.UnregisterBroker:                 true,
	protocol.WipeWritePermOfBroker:            true,
	protocol.AddWritePermOfBroker:             true,
	protocol.InvokeBrokerToResetOffset:        true,
	protocol.BrokerHeartbeat:                  true,
	protocol.ControllerAlterSyncStateSet:      true,
	protocol.ControllerElectMaster:            true,
	protocol.ControllerRegisterBroker:         true,
	protocol.ControllerGetReplicaInfo:         true,
	protocol.ControllerGetMetadataInfo:        true,
	protocol.ControllerGetSyncStateData:       true,
	protocol.ControllerGetNextBrokerID:        true,
	protocol.ControllerApplyBrokerID:          true,
	protocol.AllowLogCut:                      true,
}

// AdminOnly reports whether code needs an admin account.
func AdminOnly(code int16) bool { return adminCodes[code] }

// traceTopic may always be published to (Java's PlainPermissionManager).
const traceTopic = "RMQ_SYS_TRACE_TOPIC"

// Check decides req. It returns nil when the request may proceed.
func (r *Rules) Check(req Request) *Refusal {
	key := req.Ext[sig.FieldAccessKey]
	if key == "" {
		return &Refusal{Reason: ReasonNoCredentials, Remark: fmt.Sprintf(
			"ACL: %s (code %d) carries no AccessKey: this server takes signed requests only; give the client an access key and secret key",
			protocol.CodeName(req.Code), req.Code)}
	}
	acc, refused := r.accountAt(key, req.Remote)
	if refused != nil {
		return refused
	}
	if req.Ext[sig.FieldSignature] == "" {
		return &Refusal{Reason: ReasonSignature, Key: key, Remark: fmt.Sprintf(
			"ACL: access key %q: the request carries no Signature", key)}
	}
	if !acc.verifier.Verify(req.Ext, req.Body) {
		return &Refusal{Reason: ReasonSignature, Key: key, Remark: fmt.Sprintf(
			"ACL: access key %q: the signature does not match (a wrong secret key, or the request changed after it was signed)", key)}
	}
	if adminCodes[req.Code] && !acc.admin {
		return &Refusal{Reason: ReasonAdmin, Key: key, Remark: fmt.Sprintf(
			"ACL: access key %q may not %s (code %d): it needs an admin account", key, protocol.CodeName(req.Code), req.Code)}
	}
	return acc.permits(key, Resources(req), protocol.CodeName(req.Code))
}

// accountAt returns key's account if it may be used from remote: the key
// is an account's and remote is in the global and the account's whitelists.
// The signature is the caller's to check.
func (r *Rules) accountAt(key string, remote netip.Addr) (*account, *Refusal) {
	acc := r.accounts[key]
	if acc == nil {
		// NB: the key is the peer's; a long one is cut in the remark and
		// the log.
		return nil, &Refusal{Reason: ReasonUnknownKey, Key: key, Remark: fmt.Sprintf("ACL: access key %q is not an account of this server", shorten(key))}
	}
	if len(r.global) > 0 && !matchAny(r.global, remote) {
		return nil, &Refusal{Reason: ReasonAddress, Key: key, Remark: fmt.Sprintf(
			"ACL: access key %q: address %s is not in globalWhiteRemoteAddresses", key, remote)}
	}
	if acc.white.Set() && !acc.white.Match(remote) {
		return nil, &Refusal{Reason: ReasonAddress, Key: key, Remark: fmt.Sprintf(
			"ACL: access key %q: address %s is not in the account's whiteRemoteAddress", key, remote)}
	}
	return acc, nil
}

// permits refuses the first of ress the account lacks the permission for
// (what names the request), or returns nil.
func (a *account) permits(key string, ress []Resource, what string) *Refusal {
	if a.admin && a.perms == nil {
		return nil
	}
	for _, res := range ress {
		if !a.allows(res) {
			kind, name := "topic", res.Name
			if g, ok := strings.CutPrefix(res.Name, RetryPrefix); ok {
				kind, name = "group", g
			}
			return &Refusal{Reason: ReasonPermission, Key: key, Remark: fmt.Sprintf(
				"ACL: access key %q has no %s permission on %s %q (needed by %s)", key, res.Need, kind, name, what)}
		}
	}
	return nil
}

func (a *account) allows(res Resource) bool {
	owned, listed := a.perms[res.Name]
	if !listed {
		owned = a.defaultTopic
		if strings.HasPrefix(res.Name, RetryPrefix) {
			owned = a.defaultGroup
		}
	}
	return owned.allows(res.Need)
}

// maxShownKey bounds how much of an unknown access key a remark repeats.
const maxShownKey = 64

func shorten(key string) string {
	if len(key) <= maxShownKey {
		return key
	}
	return key[:maxShownKey] + "..."
}

func matchAny(ps []Pattern, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Match(ip) {
			return true
		}
	}
	return false
}

// Resources returns what req touches and needs, as the Java broker's
// PlainAccessValidator.parse reads it from the request code (send codes
// beyond Java's two: batch and reply sends are sends too). Codes not
// listed need a valid signature only.
func Resources(req Request) []Resource {
	ext := req.Ext
	group := func(field string) Resource { return Resource{Name: RetryPrefix + ext[field], Need: Sub} }
	switch req.Code {
	case protocol.SendMessage, protocol.SendReplyMessage:
		return sendResources(ext["topic"])
	case protocol.SendMessageV2, protocol.SendBatchMessage, protocol.SendReplyMessageV2:
		return sendResources(ext["b"])
	case protocol.ConsumerSendMsgBack:
		return []Resource{group("group")}
	case protocol.PullMessage, protocol.UpdateConsumerOffset:
		return []Resource{{Name: ext["topic"], Need: Sub}, group("consumerGroup")}
	case protocol.QueryMessage:
		return []Resource{{Name: ext["topic"], Need: Sub}}
	case protocol.UnregisterClient, protocol.GetConsumerListByGroup:
		return []Resource{group("consumerGroup")}
	case protocol.HeartBeat:
		return heartbeatResources(req)
	}
	return nil
}

func sendResources(topic string) []Resource {
	switch {
	case topic == traceTopic:
		return nil
	case strings.HasPrefix(topic, RetryPrefix):
		return []Resource{{Name: topic, Need: Sub}} // the group's resource
	}
	return []Resource{{Name: topic, Need: Pub}}
}

// heartbeatResources: SUB on every consumer group and every topic it
// subscribes to. A body that does not decode needs nothing here: the
// heartbeat handler refuses it.
func heartbeatResources(req Request) []Resource {
	if req.DecodeBody == nil {
		return nil
	}
	var hb protocol.HeartbeatData
	if err := req.DecodeBody(&hb); err != nil {
		return nil
	}
	var out []Resource
	for _, cd := range hb.ConsumerDataSet {
		out = append(out, Resource{Name: RetryPrefix + cd.GroupName, Need: Sub})
		for _, sd := range cd.SubscriptionDataSet {
			out = append(out, Resource{Name: sd.Topic, Need: Sub})
		}
	}
	return out
}
