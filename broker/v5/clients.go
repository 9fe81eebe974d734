package v5

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/metadata"
)

// Client is a live v5 client as operators see it: in the broker's
// connection lists (mqadmin consumerConnection and producerConnection, the
// console) and its client counts.
type Client struct {
	ID       string
	Addr     string // the client's "ip:port" as the server sees it
	Language string // RocketMQ's LanguageCode name: GO, JAVA, DOTNET, NODE_JS, ...
	// Version is the SDK's version as a RocketMQ MQVersion ordinal (what
	// the Java proxy reports: V5_1_4 is 441); 0 when the client sent none.
	Version  int32
	Type     v2.ClientType
	Group    string   // a consumer's group
	Topics   []string // a producer's topics, sorted
	Subs     []Sub    // a consumer's subscriptions, by topic
	LastSeen time.Time
}

// Sub is one subscription of a v5 consumer.
type Sub struct {
	Topic      string
	Expression string // "*" when the client sent none
	Type       string // TAG or SQL92, as in 4.x subscriptions
}

// IsConsumer reports whether c consumes (a simple or push consumer).
func (c Client) IsConsumer() bool {
	return c.Type == v2.ClientType_SIMPLE_CONSUMER || c.Type == v2.ClientType_PUSH_CONSUMER
}

// IsProducer reports whether c produces.
func (c Client) IsProducer() bool { return c.Type == v2.ClientType_PRODUCER }

// clientInfo is what a client told about itself: its address and SDK on
// every call, its topics or subscriptions in its Settings.
type clientInfo struct {
	addr     string
	language string
	version  int32
	topics   []string
	subs     []Sub
}

// describe records what ctx's call and set (nil for a Heartbeat) tell of
// client id, once seen has recorded it. The Settings' user agent wins over
// the request metadata; a later Heartbeat keeps what Settings said.
func (t *clientTable) describe(ctx context.Context, id string, set *v2.Settings) {
	md, _ := metadata.FromIncomingContext(ctx)
	addr := remoteOf(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.m[id]
	if c == nil { // NB: the table was full
		return
	}
	in := &c.info
	if addr.Port() != 0 {
		in.addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()).String() // NB: 127.0.0.1, not ::ffff:127.0.0.1
	}
	if in.language == "" {
		in.language = languageName(mdValue(md, mdLanguage))
	}
	if in.version == 0 {
		in.version = versionOrdinal(mdValue(md, mdClientVersion))
	}
	if set == nil {
		return
	}
	if ua := set.GetUserAgent(); ua != nil {
		if l := ua.GetLanguage(); l != v2.Language_LANGUAGE_UNSPECIFIED {
			in.language = languageName(l.String())
		}
		if v := versionOrdinal(ua.GetVersion()); v != 0 {
			in.version = v
		}
	}
	if pub := set.GetPublishing(); pub != nil {
		in.topics = in.topics[:0]
		for _, r := range pub.GetTopics() {
			if len(in.topics) >= maxClientTopics {
				break
			}
			if r.GetName() != "" {
				in.topics = append(in.topics, r.GetName())
			}
		}
		slices.Sort(in.topics)
		in.topics = slices.Compact(in.topics)
	}
	if sub := set.GetSubscription(); sub != nil {
		in.subs = in.subs[:0]
		for _, e := range sub.GetSubscriptions() {
			if len(in.subs) >= maxClientTopics {
				break
			}
			if e.GetTopic().GetName() == "" {
				continue
			}
			s := Sub{Topic: e.GetTopic().GetName(), Expression: cmp.Or(e.GetExpression().GetExpression(), "*"), Type: "TAG"}
			if e.GetExpression().GetType() == v2.FilterType_SQL {
				s.Type = "SQL92"
			}
			in.subs = append(in.subs, s)
		}
		slices.SortFunc(in.subs, func(a, b Sub) int { return strings.Compare(a.Topic, b.Topic) })
	}
}

// maxClientTopics bounds the topics (subscriptions) recorded of one
// client's Settings: a Settings message may name hundreds of thousands,
// and describe works under clientTable.mu.
const maxClientTopics = 1024

// mdClientVersion is the request metadata key of the SDK's version.
const mdClientVersion = "x-mq-client-version"

// languageName maps a v5 Language name (or the x-mq-language value) to
// RocketMQ's LanguageCode name, as the 4.x clients report theirs.
func languageName(l string) string {
	switch l = strings.ToUpper(l); l {
	case "GOLANG":
		return "GO"
	case "DOT_NET":
		return "DOTNET"
	case "LANGUAGE_UNSPECIFIED":
		return ""
	}
	return l
}

// versionOrdinal maps "5.1.4" (or "5.1.4-rc1") to RocketMQ's MQVersion
// ordinal (V5_1_4). From V4_0_0 on, every x.y.z has a SNAPSHOT ordinal and
// the release's, so ordinals run in steps of 2 per patch and 20 per minor.
// 0 for what is not a 4.x or 5.x version.
func versionOrdinal(v string) int32 {
	v, _, _ = strings.Cut(v, "-")
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return 0
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || x > 9 {
			return 0
		}
		n[i] = x
	}
	const v400Snapshot = 212 // MQVersion.V4_0_0_SNAPSHOT
	if n[0] != 4 && n[0] != 5 {
		return 0
	}
	return int32(v400Snapshot + (n[0]-4)*200 + n[1]*20 + n[2]*2 + 1)
}

// ListClients returns the live clients (seen within the expiry, not
// terminated), sorted by id. A client whose heartbeats stopped drops out
// of the list at once when its expiry passes, before a sweep deletes it.
func (s *Server) ListClients() []Client {
	now := s.opts.Now()
	s.clients.mu.Lock()
	out := make([]Client, 0, len(s.clients.m))
	for id, c := range s.clients.m {
		if now.Sub(c.lastSeen) > clientExpiry {
			continue
		}
		out = append(out, Client{ID: id, Addr: c.info.addr, Language: c.info.language, Version: c.info.version,
			Type: c.kind, Group: c.group, Topics: slices.Clone(c.info.topics), Subs: slices.Clone(c.info.subs),
			LastSeen: c.lastSeen})
	}
	s.clients.mu.Unlock()
	slices.SortFunc(out, func(a, b Client) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// ConsumerClients returns the live consumers of group, sorted by id.
func (s *Server) ConsumerClients(group string) []Client {
	return slices.DeleteFunc(s.ListClients(), func(c Client) bool { return !c.IsConsumer() || c.Group != group })
}

// ProducerClients returns the live producers listed under producer group
// group. v5 producers have no group: as the Java proxy does, each is listed
// under every topic it publishes to (its Settings' topics), so
// producerConnection -g TOPIC -t TOPIC finds them.
func (s *Server) ProducerClients(group string) []Client {
	return slices.DeleteFunc(s.ListClients(), func(c Client) bool {
		return !c.IsProducer() || !slices.Contains(c.Topics, group)
	})
}
