package conf

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConsoleAddr: the quickstart serves the console on 127.0.0.1:8080 by
// default, a broker with nameservers and a nameserver do not, "off" turns
// it off and an address is used as given.
func TestConsoleAddr(t *testing.T) {
	b := DefaultBroker()
	require.Equal(t, "127.0.0.1:8080", b.ConsoleAddr())
	b.Console.Listen = "off"
	require.Equal(t, "", b.ConsoleAddr())
	require.NoError(t, b.Validate())
	b.Console.Listen = "0.0.0.0:9000"
	require.Equal(t, "0.0.0.0:9000", b.ConsoleAddr())
	b.Console.Listen = ""
	b.NamesrvAddr = "127.0.0.1:9876"
	require.Equal(t, "", b.ConsoleAddr())

	n := DefaultNameserver()
	require.Equal(t, "", n.ConsoleAddr())
	n.Console.Listen = "127.0.0.1:8081"
	require.Equal(t, "127.0.0.1:8081", n.ConsoleAddr())
	n.Console.Listen = "off"
	require.Equal(t, "", n.ConsoleAddr())
	n.Console.Listen = "nope"
	require.ErrorContains(t, n.Validate(), "console.listen")
}
