package conf

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGRPCAddr(t *testing.T) {
	for _, tc := range []struct{ listen, grpc, want string }{
		{"127.0.0.1:10911", "", "127.0.0.1:8081"},
		{"127.0.0.1:0", "", "127.0.0.1:0"},
		{":10911", "", ":8081"},
		{"127.0.0.1:10911", "off", ""},
		{"127.0.0.1:10911", "0.0.0.0:9081", "0.0.0.0:9081"},
	} {
		b := DefaultBroker()
		b.Listen, b.GRPC.Listen = tc.listen, tc.grpc
		require.Equal(t, tc.want, b.GRPCAddr(), "listen %q grpc %q", tc.listen, tc.grpc)
	}
	b := DefaultBroker()
	b.GRPC.Listen = "nohost"
	err := b.Validate()
	require.ErrorContains(t, err, "grpc.listen")
	t.Setenv("SLUICE_GRPC_LISTEN", "off")
	b, err = LoadBroker("")
	require.NoError(t, err)
	require.Equal(t, "", b.GRPCAddr())
}
