package message

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name  string
		props string
		want  map[string]string
	}{
		{"empty", "", map[string]string{}},
		{"java", "TAGS\x01TagA\x02KEYS\x01k1 k2", map[string]string{"TAGS": "TagA", "KEYS": "k1 k2"}},
		{"go-trailing-separator", "TAGS\x01TagA\x02KEYS\x01k1 k2\x02", map[string]string{"TAGS": "TagA", "KEYS": "k1 k2"}},
		{"empty-pieces", "\x02\x02TAGS\x01TagA\x02\x02\x02KEYS\x01k\x02\x02", map[string]string{"TAGS": "TagA", "KEYS": "k"}},
		{"piece-without-separator", "junk\x02TAGS\x01TagA\x02x", map[string]string{"TAGS": "TagA"}},
		{"separator-at-start", "\x01v\x02TAGS\x01TagA", map[string]string{"TAGS": "TagA"}},
		{"separator-at-end", "a\x01\x02TAGS\x01TagA", map[string]string{"TAGS": "TagA"}},
		{"short-pieces", "a\x01\x02\x01\x02\x01b\x02a", map[string]string{}},
		{"shortest-pair", "a\x01b", map[string]string{"a": "b"}},
		{"value-with-name-separator", "a\x01b\x01c", map[string]string{"a": "b\x01c"}},
		{"last-wins", "a\x011\x02b\x012\x02a\x013", map[string]string{"a": "3", "b": "2"}},
		{"case-sensitive", "tags\x01x\x02TAGS\x01y", map[string]string{"tags": "x", "TAGS": "y"}},
		{"utf8", "标签\x01值", map[string]string{"标签": "值"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseProperties(tc.props)
			require.Equal(t, tc.want, got)
			for name, value := range tc.want {
				v, ok := PropertyValue(tc.props, name)
				require.True(t, ok, name)
				require.Equal(t, value, v)
				vb, ok := PropertyValueBytes([]byte(tc.props), name)
				require.True(t, ok, name)
				require.Equal(t, value, string(vb))
			}
			_, ok := PropertyValue(tc.props, "absent")
			require.False(t, ok)
			_, ok = PropertyValue(tc.props, "")
			require.False(t, ok)
		})
	}
}

func TestPropertiesSeq(t *testing.T) {
	var names, values []string
	for n, v := range PropertiesSeq("a\x011\x02\x02junk\x02b\x012\x02a\x013\x02") {
		names, values = append(names, n), append(values, v)
	}
	require.Equal(t, []string{"a", "b", "a"}, names)
	require.Equal(t, []string{"1", "2", "3"}, values)

	n := 0
	for range PropertiesSeq("a\x011\x02b\x012") {
		n++
		break
	}
	require.Equal(t, 1, n, "stops when the loop breaks")
}

func TestAppendProperties(t *testing.T) {
	got := AppendProperties([]byte("prefix:"), map[string]string{
		"UNIQ_KEY": "U", "KEYS": "k1 k2", "TAGS": "TagA",
		"":         "empty name",
		"empty":    "",
		"bad\x01n": "v",
		"bad\x02n": "v",
		"badvalue": "a\x02b",
		"okvalue":  "a\x01b",
	})
	require.Equal(t, "prefix:KEYS\x01k1 k2\x02TAGS\x01TagA\x02UNIQ_KEY\x01U\x02okvalue\x01a\x01b", string(got))
	require.Empty(t, AppendProperties(nil, nil))
	require.Equal(t, "a\x01b", string(AppendProperties(nil, map[string]string{"a": "b"})))
}

func TestDeleteProperty(t *testing.T) {
	goStyle := "TAGS\x01TagA\x02WAIT\x01true\x02KEYS\x01k\x02"
	require.Equal(t, "TAGS\x01TagA\x02KEYS\x01k", DeleteProperty(goStyle, PropWait))
	require.Equal(t, "TAGS\x01TagA", DeleteProperty("WAIT\x01a\x02TAGS\x01TagA\x02WAIT\x01b", PropWait), "every occurrence")
	require.Equal(t, "", DeleteProperty("WAIT\x01false", PropWait))
	require.Equal(t, goStyle, DeleteProperty(goStyle, "absent"), "unchanged when absent")
	require.Equal(t, "junk\x02\x02", DeleteProperty("junk\x02\x02", "junk"), "a piece without \\x01 has no name")
	require.Equal(t, "KEYS\x01k", DeleteProperty("junk\x02WAIT\x01x\x02KEYS\x01k", PropWait), "rebuilt from pairs")
}

func TestSetProperty(t *testing.T) {
	tests := []struct {
		props, name, value, want string
	}{
		{"", PropRealTopic, "T", "REAL_TOPIC\x01T"},
		{"TAGS\x01TagA", PropRealTopic, "T", "TAGS\x01TagA\x02REAL_TOPIC\x01T"},
		{"TAGS\x01TagA\x02", PropRealTopic, "T", "TAGS\x01TagA\x02REAL_TOPIC\x01T"},
		{"DELAY\x013\x02TAGS\x01TagA\x02", PropDelay, "4", "TAGS\x01TagA\x02DELAY\x014"},
		{"junk", "a", "b", "junk\x02a\x01b"},
	}
	for _, tc := range tests {
		got, err := SetProperty(tc.props, tc.name, tc.value)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%q", tc.props)
		v, ok := PropertyValue(got, tc.name)
		require.True(t, ok)
		require.Equal(t, tc.value, v)
	}
	for _, bad := range [][2]string{{"", "v"}, {"n", ""}, {"n\x01", "v"}, {"n\x02", "v"}, {"n", "v\x02INJECTED\x01x"}} {
		got, err := SetProperty("TAGS\x01a", bad[0], bad[1])
		require.ErrorIs(t, err, ErrInvalidProperty, "%q", bad)
		require.Equal(t, "TAGS\x01a", got)
	}
}

func TestProperties_GoldenSendMessage(t *testing.T) {
	// The Go client's properties string, trailing separator included.
	props := readFrame(t, "02-send-message.bin").ExtFields["properties"]
	require.True(t, strings.HasSuffix(props, "\x02"))
	want := map[string]string{
		PropTags:    "TagA",
		PropKeys:    "order-1001 user-42",
		"region":    "eu-west-1",
		PropUniqKey: "C000020272AC00000000952411a80001",
	}
	require.Equal(t, want, ParseProperties(props))
	v, ok := PropertyValue(props, PropKeys)
	require.True(t, ok)
	require.Equal(t, []string{"order-1001", "user-42"}, strings.Fields(v))

	java := string(AppendProperties(nil, ParseProperties(props)))
	require.Equal(t, "KEYS\x01order-1001 user-42\x02TAGS\x01TagA\x02UNIQ_KEY\x01C000020272AC00000000952411a80001\x02region\x01eu-west-1", java)
	require.Equal(t, want, ParseProperties(java))

	delayed := readFrame(t, "05-send-message-delay-level-3.bin").ExtFields["properties"]
	v, ok = PropertyValue(delayed, PropDelay)
	require.True(t, ok)
	require.Equal(t, "3", v)
}

func TestKeysSeq(t *testing.T) {
	var keys []string
	for k := range KeysSeq([]byte("  order-1001 user-42  tab\tkey ")) {
		keys = append(keys, string(k))
	}
	require.Equal(t, []string{"order-1001", "user-42", "tab\tkey"}, keys)
	for range KeysSeq(nil) {
		t.Fatal("no keys in nil")
	}
}
