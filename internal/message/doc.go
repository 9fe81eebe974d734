// Package message encodes and decodes RocketMQ 4.x messages as Sluice
// stores and sends them: the v1 stored record (commitlog records, pull
// bodies), the properties string, the SEND_BATCH_MESSAGE body, offset and
// unique message ids, the tags and key hashes, and zlib bodies. It imports
// only the standard library. Facts are from spec/rocketmq-4x.md §6, §7.3 and
// §7.4.
//
// # Stored record (v1)
//
// Big-endian. Offsets are for IPv4 hosts; each IPv6 host (SYSFLAG 0x10 for
// BORNHOST, 0x20 for STOREHOST) is 20 bytes instead of 8 and moves every
// later field by 12.
//
//	 0  TOTALSIZE        int32  whole record, this field included
//	 4  MAGICCODE        int32  0xDAA320A7 (v1)
//	 8  BODYCRC          int32  crc32.ChecksumIEEE(body) & 0x7FFFFFFF
//	12  QUEUEID          int32
//	16  FLAG             int32  user flag
//	20  QUEUEOFFSET      int64  index in the (topic, queueId) consume queue
//	28  PHYSICALOFFSET   int64  commitlog position of this record
//	36  SYSFLAG          int32  compressed, multi-tags, tx type, host families
//	40  BORNTIMESTAMP    int64  ms
//	48  BORNHOST         4+4    IPv4 address, int32 port (16+4 if IPv6)
//	56  STORETIMESTAMP   int64  ms
//	64  STOREHOST        4+4    as BORNHOST
//	72  RECONSUMETIMES   int32
//	76  PREPARED_TX_OFF  int64
//	84  BODYLENGTH       int32
//	88  BODY             n      as received (compressed if SYSFLAG 0x1)
//	    TOPICLENGTH      int8   1..127
//	    TOPIC            n
//	    PROPERTIESLENGTH int16  0..32767
//	    PROPERTIES       n
//
// TOTALSIZE = 91 + body + topic + properties (+12 per IPv6 host). Example:
// body "hello-1", topic "TopicTest" and 63 bytes of properties give 170.
//
// Encode writes a record in place (no allocation; the commitlog calls it
// under its append lock). Decode, Validate and ReadDispatchInfo read one
// from untrusted bytes: they never panic, check every length before using
// it, and return errors wrapping ErrMalformed (or ErrCRC) that name the
// field. Validate is recovery's deep check; ReadDispatchInfo reads only
// what the dispatcher needs. Decoded slices alias the input.
//
// # Properties string
//
//	name \x01 value \x02 name \x01 value ...
//
// Java writes no trailing \x02, the Go client writes one after every pair.
// Readers skip empty pieces and pieces whose first \x01 is missing or at
// either end; the last pair with a name wins. Writers here produce the Java
// form, sorted by name when built from a map.
//
// # Batch body
//
// SEND_BATCH_MESSAGE carries the messages back to back, each
//
//	TOTALSIZE int32 (= 22 + body + properties) | MAGICCODE int32 (0) |
//	BODYCRC int32 (0) | FLAG int32 | BODYLENGTH int32 | BODY |
//	PROPERTIESLENGTH int16 | PROPERTIES
//
// Topic, queue, sysFlag and born time come from the request header.
//
// # Message ids
//
// The offset id is uppercase hex of store IP (4 or 16 bytes), port (int32)
// and physical offset (int64): 32 or 56 characters. UNIQ_KEY, the id users
// see, is 16 bytes of client IPv4, pid, class-loader hash, ms since the start
// of the month and a counter, as 32 hex characters.
//
// # Concurrency
//
// Everything is a pure function of its arguments except UniqIDGenerator,
// which is safe for concurrent use.
package message
