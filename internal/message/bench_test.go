package message

import (
	"fmt"
	"net/netip"
	"testing"
)

func benchMessage() Message {
	m := sampleMessage()
	m.Body = make([]byte, 1<<10)
	m.StoreHost = netip.MustParseAddrPort("[2001:db8::1]:10911")
	return m
}

func BenchmarkEncode(b *testing.B) {
	b.Run("body=1KiB", func(b *testing.B) {
		m := benchMessage()
		buf := make([]byte, m.EncodedSize())
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := m.Encode(buf, int64(i), int64(i)*int64(len(buf))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	// NB: crc=true is recovery's check; a live dispatcher skips the CRC.
	for _, crc := range []bool{true, false} {
		b.Run(fmt.Sprintf("body=1KiB/crc=%t", crc), func(b *testing.B) {
			m := benchMessage()
			rec := encodeT(b, &m, 0, 0)
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Validate(rec, 0, crc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReadDispatchInfo(b *testing.B) {
	b.Run("body=1KiB", func(b *testing.B) {
		m := benchMessage()
		rec := encodeT(b, &m, 0, 0)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ReadDispatchInfo(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeBatch: a batch of 32 items of 1 KiB with typical
// properties; the items' properties share one allocation.
func BenchmarkDecodeBatch(b *testing.B) {
	items := make([]BatchItem, 32)
	for i := range items {
		items[i] = BatchItem{Body: make([]byte, 1024), Properties: "TAGS\x01bench\x02UNIQ_KEY\x017F0000010001000000000000000A0001"}
	}
	body, err := AppendBatch(nil, items)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := DecodeBatch(body, func(it BatchItem) error { n += len(it.Properties); return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendProperties: what the broker reads and rewrites in a sent
// message's properties (the official Go client's, with a key and a tag),
// per name as before, in one scan and a rewrite, and in one scan and a
// cut (what the broker does).
func BenchmarkSendProperties(b *testing.B) {
	props := "KEYS\x01order-42\x02UNIQ_KEY\x017F000001000018B4AAC2A2D8A1B20000\x02WAIT\x01true\x02TAGS\x01TagA\x02"
	b.Run("per-name", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, ok := PropertyValue(props, PropWait)
			p := props
			if ok && v != "" {
				p = DeleteProperty(p, PropWait)
			}
			PropertyValue(p, PropTranMsg)
			PropertyValue(p, PropDelay)
			PropertyValue(p, PropTimerDeliverMS)
			if _, err := SetProperty(p, PropCluster, "DefaultCluster"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if sp := ReadSendProperties(props); !sp.HasWait {
				b.Fatal("no WAIT")
			}
			StoreProperties(props, "DefaultCluster")
		}
	})
	b.Run("one-scan-cut", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sp := ReadSendProperties(props)
			if !sp.HasWait {
				b.Fatal("no WAIT")
			}
			sp.StoreProperties(props, "DefaultCluster")
		}
	})
}
