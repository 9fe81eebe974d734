package remoting

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/protocol"
)

// BenchmarkHeaderCodec encodes and decodes the header of a real
// SEND_MESSAGE (golden frame 02: 14 extFields, ~450 bytes of JSON).
func BenchmarkHeaderCodec(b *testing.B) {
	var h Header
	require.NoError(b, JSONCodec.DecodeHeader(goldenHeaderBytes(b, "02-send-message.bin"), &h))
	for _, tc := range []struct {
		name  string
		codec HeaderCodec
	}{{"json", JSONCodec}, {"msgpack", MsgpackCodec}, {"rocketmq", RocketMQCodec}} {
		enc, err := tc.codec.AppendHeader(nil, &h)
		require.NoError(b, err)
		b.Run(tc.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			buf := make([]byte, 0, 1024)
			for b.Loop() {
				buf, _ = tc.codec.AppendHeader(buf[:0], &h)
			}
		})
		b.Run(tc.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			var out Header
			for b.Loop() {
				if err := tc.codec.DecodeHeader(enc, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRoundTrip measures Invoke → echo handler → response over one
// loopback connection with a 1 KiB body, serially and with 16 concurrent
// callers multiplexed on the same connection.
func BenchmarkRoundTrip(b *testing.B) {
	s := startServer(b, ServerOptions{}, map[int16]Handler{codeEcho: echo})
	addr := s.Addr().String()
	body := make([]byte, 1024)
	ext := map[string]string{"topic": "SluiceTopic", "queueId": "1", "producerGroup": "pg"}
	for _, st := range []SerializeType{SerializeJSON, SerializeMsgpack} {
		c := newClient(b, st)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		b.Cleanup(cancel)
		_, err := c.Invoke(ctx, addr, NewRequest(codeEcho, ext, body))
		require.NoError(b, err)
		b.Run(st.String()+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(2 * int64(len(body)))
			for b.Loop() {
				if _, err := c.Invoke(ctx, addr, NewRequest(codeEcho, ext, body)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(st.String()+"/concurrent16", func(b *testing.B) {
			conn, err := c.Conn(ctx, addr)
			require.NoError(b, err)
			frames0, flushes0 := conn.writeStats()
			defer func() {
				frames, flushes := conn.writeStats()
				b.ReportMetric(float64(frames-frames0)/float64(max(flushes-flushes0, 1)), "frames/flush")
			}()
			b.ReportAllocs()
			b.SetBytes(2 * int64(len(body)))
			b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Invoke(ctx, addr, NewRequest(codeEcho, ext, body)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkSendAnswer decodes a send's answer header (msgpack) and reads
// it: from pairs, as the producer does, or through a map, as for any
// other answer.
func BenchmarkSendAnswer(b *testing.B) {
	h := Header{Code: protocol.Success, Flag: FlagResponse, Opaque: 7, ExtFields: map[string]string{
		"msgId": "7F00000100002A9F0000000000A3C2D1", "queueId": "3", "queueOffset": "123456",
		"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}}
	enc, err := MsgpackCodec.AppendHeader(nil, &h)
	require.NoError(b, err)
	for _, pairs := range []bool{true, false} {
		name := "map"
		if pairs {
			name = "pairs"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var out Header
			var rh protocol.SendMessageResponseHeader
			for b.Loop() {
				if err := MsgpackCodec.DecodeHeader(enc, &out); err != nil {
					b.Fatal(err)
				}
				if pairs {
					err = rh.FromExtPairs(out.ExtPairs)
				} else {
					err = rh.FromExt(out.ExtMap())
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSendRequestHeader decodes the msgpack header of a
// SEND_MESSAGE_V2 as Sluice's producer sends it and reads it as the
// broker does (FromExtPairs): the broker's header work per message. Its
// allocs/op is the count to keep (today 1: the one copy of the header's
// strings; the pairs' spans are cut from a block shared by many headers).
func BenchmarkSendRequestHeader(b *testing.B) {
	v2 := protocol.SendMessageRequestHeaderV2{ProducerGroup: "bench-pg", Topic: "bench", DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 4, QueueID: 3, BornTimestamp: 1764620000000, BrokerName: "broker-a",
		Properties: "UNIQ_KEY\x017F000001000018B4AAC20A3B5C000001\x02WAIT\x01true\x02"}
	h := Header{Code: protocol.SendMessageV2, Language: protocol.LanguageGo, Version: protocol.CurrentVersion, Opaque: 42, ExtWriter: &v2}
	enc, err := MsgpackCodec.AppendHeader(nil, &h)
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	var out Header
	var got protocol.SendMessageRequestHeaderV2
	for b.Loop() {
		if err := MsgpackCodec.DecodeHeader(enc, &out); err != nil {
			b.Fatal(err)
		}
		if err := got.FromExtPairs(out.ExtPairs); err != nil {
			b.Fatal(err)
		}
	}
	require.Equal(b, v2.Properties, got.Properties)
}
