package group

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/stretchr/testify/require"
)

func TestParseSubscription(t *testing.T) {
	for _, tc := range []struct {
		expr string
		tags []string
	}{
		{"*", nil}, {"", nil}, {" * ", nil},
		{"TagA", []string{"TagA"}},
		{"TagA || TB", []string{"TagA", "TB"}},
		{"TagA||TagA|| ", []string{"TagA"}},
	} {
		s := ParseSubscription("t", tc.expr)
		require.Equal(t, tc.tags, s.Tags, tc.expr)
		require.Equal(t, tc.tags == nil, s.Codes == nil)
	}
	s := ParseSubscription("t", "TagA || TB")
	require.Equal(t, []int64{2598919, 2670}, s.Codes.Codes(), "Java hash codes (spec 3.3)")
	require.True(t, s.Matches(message.TagsHashCode("TB")))
	require.False(t, s.Matches(message.TagsHashCode("TC")))
	require.True(t, ParseSubscription("t", "*").Matches(123))
}

// TestParseSubscription_ManyTags: a long tag list (a set deduplicates it,
// where a list search took time quadratic in the tags) keeps the first of
// each tag, in order, with its code.
func TestParseSubscription_ManyTags(t *testing.T) {
	var expr []string
	var want []string
	for i := range 1000 {
		tag := fmt.Sprint("T", i%700)
		expr = append(expr, tag, " ")
		if i < 700 {
			want = append(want, tag)
		}
	}
	s := ParseSubscription("t", strings.Join(expr, "||"))
	require.Equal(t, want, s.Tags)
	require.Len(t, s.Codes.Codes(), len(want))
	require.Equal(t, message.TagsHashCode("T699"), s.Codes.Codes()[699])
}

func TestRegistry_Membership(t *testing.T) {
	r := New()
	now := time.Now()
	subs := map[string]Subscription{"t": ParseSubscription("t", "*")}
	require.True(t, r.Register("g", Consumer{ClientID: "c1", ConnID: 1, Subs: subs, LastSeen: now}))
	require.False(t, r.Register("g", Consumer{ClientID: "c1", ConnID: 1, Subs: subs, LastSeen: now}), "refresh")
	require.True(t, r.Register("g", Consumer{ClientID: "c1", ConnID: 1, Subs: map[string]Subscription{"t": ParseSubscription("t", "A")}, LastSeen: now}), "subscription changed")
	require.True(t, r.Register("g", Consumer{ClientID: "c2", ConnID: 2, Subs: subs, LastSeen: now.Add(-time.Hour)}))
	require.Equal(t, []string{"c1", "c2"}, r.ConsumerIDs("g"))
	sub, ok, known := r.Subscription("g", "t")
	require.True(t, ok)
	require.True(t, known)
	require.NotEmpty(t, sub.Topic)
	_, ok, known = r.Subscription("g", "other")
	require.False(t, ok)
	require.True(t, known)
	require.Equal(t, []string{"g"}, r.Expire(now.Add(-time.Minute)))
	require.Equal(t, []string{"c1"}, r.ConsumerIDs("g"))
	require.Equal(t, []string{"g"}, r.DropConn(1))
	require.Empty(t, r.ConsumerIDs("g"))
	require.Empty(t, r.Groups())
}

func TestRegistry_Locks(t *testing.T) {
	r := New()
	now := time.Now()
	q0, q1 := Queue{"t", "b", 0}, Queue{"t", "b", 1}
	require.Equal(t, []Queue{q0, q1}, r.Lock("g", "c1", []Queue{q0, q1}, now))
	require.Empty(t, r.Lock("g", "c2", []Queue{q0}, now.Add(time.Second)), "held by c1")
	require.Equal(t, []Queue{q0}, r.Lock("g", "c1", []Queue{q0}, now.Add(time.Second)), "refresh")
	require.Equal(t, []Queue{q1}, r.Lock("g", "c2", []Queue{q1}, now.Add(LockMaxLive+time.Second)), "expired lock is taken over")
	r.Unlock("g", "c1", []Queue{q0, q1})
	holder, ok := r.LockHolder("g", q1, now.Add(LockMaxLive+2*time.Second))
	require.True(t, ok)
	require.Equal(t, "c2", holder, "unlock releases only the caller's locks")
	_, ok = r.LockHolder("g", q0, now)
	require.False(t, ok)
}

// TestRegistry_ExpireLocks: locks not refreshed for LockMaxLive are
// forgotten (a lock is taken for any queue named, and a dead client keeps
// its locks: the table would only grow); live ones stay.
func TestRegistry_ExpireLocks(t *testing.T) {
	r := New()
	now := time.Now()
	q0, q1 := Queue{"t", "b", 0}, Queue{"t", "b", 1}
	r.Lock("g", "dead", []Queue{q0}, now)
	r.Lock("g", "live", []Queue{q1}, now.Add(LockMaxLive/2))
	r.ExpireLocks(now.Add(LockMaxLive))
	require.Len(t, r.locks, 1)
	holder, ok := r.LockHolder("g", q1, now.Add(LockMaxLive))
	require.True(t, ok)
	require.Equal(t, "live", holder)
}

func TestConfigTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "groups")
	tb, err := OpenConfigTable(path)
	require.NoError(t, err)
	c, err := tb.Ensure("cg")
	require.NoError(t, err)
	require.Equal(t, int32(16), c.RetryMaxTimes)
	require.True(t, c.ConsumeEnable)
	c.RetryMaxTimes = 3
	require.NoError(t, tb.Put(c))
	c.RetryMaxTimes = -1
	require.Error(t, tb.Put(c))
	tb2, err := OpenConfigTable(path)
	require.NoError(t, err)
	got, ok := tb2.Get("cg")
	require.True(t, ok)
	require.Equal(t, int32(3), got.RetryMaxTimes)
	deleted, err := tb2.Delete("cg")
	require.NoError(t, err)
	require.True(t, deleted)
	all, _ := tb2.All()
	require.Empty(t, all)
}

func TestClientProducerConns(t *testing.T) {
	r := New()
	t0 := time.Unix(1_700_000_000, 0)
	r.RegisterProducer("pg1", "ip@1", 7, t0)
	r.RegisterProducer("pg2", "ip@1", 9, t0.Add(2*time.Second))
	r.RegisterProducer("pg3", "ip@1", 8, t0.Add(time.Second))
	r.RegisterProducer("pg1", "other@2", 5, t0.Add(3*time.Second))
	r.RegisterProducer("pg3", "ip@1", 7, t0.Add(500*time.Millisecond)) // conn 7 in two groups: its latest counts
	require.Equal(t, []uint64{9, 8, 7}, r.ClientProducerConns("ip@1"), "most recently seen first")
	require.Empty(t, r.ClientProducerConns("nobody@3"))
}
