package nameserver

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/protocol"
	"github.com/sluicemq/sluice/internal/remoting"
)

// TestBodyFlood: a registration whose topic table holds more values than
// maxRegisterValues (empty configs: 8 bytes of JSON each, some 150 bytes
// of Go) and a DataVersion of more than maxSmallValues are refused with
// SYSTEM_ERROR naming the bound, before they are decoded; the server goes
// on answering.
func TestBodyFlood(t *testing.T) {
	c := dial(t, startServer(t, nil), remoting.SerializeJSON)
	b := masterA()

	var body bytes.Buffer
	body.WriteString(`{"topicConfigSerializeWrapper":{"topicConfigTable":{`)
	for i := range maxRegisterValues + 1 {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString(`"` + strconv.Itoa(i) + `":{}`)
	}
	body.WriteString(`}}}`)
	h := b.header()
	h.BodyCrc32 = message.BodyCRC(body.Bytes())

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	resp := c.call(protocol.RegisterBroker, h, body.Bytes())
	runtime.ReadMemStats(&ms)
	require.Equal(t, int16(protocol.SystemError), resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "more than "+strconv.Itoa(maxRegisterValues)+" values")
	// NB: the server runs in this process; decoding the table would have
	// taken some 150 MiB.
	require.Less(t, ms.TotalAlloc-before, uint64(64<<20))

	dv := []byte(`{"counter":1,"timestamp":2,"x":[` + string(bytes.Repeat([]byte("0,"), maxSmallValues)) + `0]}`)
	resp = c.call(protocol.QueryDataVersion, &protocol.QueryDataVersionRequestHeader{
		BrokerName: b.name, BrokerAddr: b.addr, ClusterName: b.cluster}, dv)
	require.Equal(t, int16(protocol.SystemError), resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "more than "+strconv.Itoa(maxSmallValues)+" values")

	c.mustRegister(b)
}
