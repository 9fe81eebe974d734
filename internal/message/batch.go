package message

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// BatchItem is one message of a SEND_BATCH_MESSAGE body. Topic, queue,
// sysFlag, born timestamp and reconsume count come from the request header
// and are shared by all items.
type BatchItem struct {
	Flag       int32
	Body       []byte // aliases the batch body when decoded
	Properties string
}

// DecodeBatch splits a batch body (spec §6.6) and calls fn for each item in
// order, stopping at and returning fn's first error. The whole body is
// checked before fn is called, so fn never sees part of a bad batch: every
// TOTALSIZE must equal 22 + body + properties and fit the rest of the body,
// lengths must be non-negative, and an empty body or trailing bytes that do
// not form an item are rejected. MAGICCODE and BODYCRC are ignored, as the
// Java broker does (clients write 0). Errors other than fn's wrap
// ErrMalformedBatch and give the item index and byte position. DecodeBatch
// never panics; items are not checked against CheckLimits.
func DecodeBatch(body []byte, fn func(BatchItem) error) error {
	items, err := DecodeBatchItems(body, "")
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := fn(it); err != nil {
			return err
		}
	}
	return nil
}

// DecodeBatchItems splits a batch body as DecodeBatch does and returns its
// items. suffix, when not empty, is a property pair ("NAME\x01value\x02")
// appended to every item's properties (after a separator if they lack
// one): the broker adds CLUSTER so. The items' properties are substrings of
// one string: one allocation a batch, not one an item.
func DecodeBatchItems(body []byte, suffix string) ([]BatchItem, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: no items", ErrMalformedBatch)
	}
	count, propsLen := 0, 0
	for pos := 0; pos < len(body); count++ {
		size, bodyEnd, err := checkBatchItem(body[pos:])
		if err != nil {
			return nil, fmt.Errorf("%w: item %d at byte %d: %w", ErrMalformedBatch, count, pos, err)
		}
		propsLen += size - bodyEnd - LenPropsLen
		pos += size
	}
	if suffix != "" {
		propsLen += count * (len(suffix) + 1)
	}
	var sb strings.Builder
	sb.Grow(propsLen)
	ends := make([]int, 0, count)
	for pos := 0; pos < len(body); {
		size, bodyEnd, _ := checkBatchItem(body[pos:])
		p := body[pos+bodyEnd+LenPropsLen : pos+size]
		sb.Write(p)
		if suffix != "" {
			if len(p) > 0 && p[len(p)-1] != PropertySeparator {
				sb.WriteByte(PropertySeparator)
			}
			sb.WriteString(suffix)
		}
		ends = append(ends, sb.Len())
		pos += size
	}
	all := sb.String()
	items := make([]BatchItem, count)
	for i, pos, from := 0, 0, 0; pos < len(body); i++ {
		size, bodyEnd, _ := checkBatchItem(body[pos:])
		b := body[pos : pos+size]
		items[i] = BatchItem{
			Flag:       getI32(b, batchOffFlag),
			Body:       b[batchOffBody:bodyEnd:bodyEnd],
			Properties: all[from:ends[i]],
		}
		from = ends[i]
		pos += size
	}
	return items, nil
}

// checkBatchItem checks the item at the start of b and returns its size and
// the end of its body.
func checkBatchItem(b []byte) (size, bodyEnd int, err error) {
	if len(b) < BatchItemOverhead {
		return 0, 0, fmt.Errorf("%d bytes left, an item needs at least %d", len(b), BatchItemOverhead)
	}
	total := getI32(b, OffTotalSize)
	if total < BatchItemOverhead || int64(total) > int64(len(b)) {
		return 0, 0, fmt.Errorf("TOTALSIZE %d outside %d..%d", total, BatchItemOverhead, len(b))
	}
	size = int(total)
	bodyLen := getI32(b, batchOffBodyLen)
	if bodyLen < 0 || int64(bodyLen) > int64(size-BatchItemOverhead) {
		return 0, 0, fmt.Errorf("BODYLENGTH %d does not fit TOTALSIZE %d", bodyLen, size)
	}
	bodyEnd = batchOffBody + int(bodyLen)
	propsLen := int(getI16(b, bodyEnd))
	if propsLen < 0 {
		return 0, 0, fmt.Errorf("PROPERTIESLENGTH %d is negative", propsLen)
	}
	if end := bodyEnd + LenPropsLen + propsLen; end != size {
		return 0, 0, fmt.Errorf("field lengths add up to %d bytes, TOTALSIZE is %d", end, size)
	}
	return size, bodyEnd, nil
}

// BatchItemSize returns the encoded size of it in a batch body.
func BatchItemSize(it BatchItem) int {
	return BatchItemOverhead + len(it.Body) + len(it.Properties)
}

// AppendBatch appends items as a batch body to dst, with MAGICCODE and
// BODYCRC 0 as the clients write them. It fails, returning dst unchanged,
// when an item's properties exceed MaxPropertiesLen or its size exceeds the
// int32 TOTALSIZE.
func AppendBatch(dst []byte, items []BatchItem) ([]byte, error) {
	n := 0
	for i, it := range items {
		if len(it.Properties) > MaxPropertiesLen {
			return dst, fmt.Errorf("batch item %d: %w: %d bytes, limit %d",
				i, ErrPropertiesTooLong, len(it.Properties), MaxPropertiesLen)
		}
		size := BatchItemSize(it)
		if size > math.MaxInt32 {
			return dst, fmt.Errorf("batch item %d: %w: %d bytes", i, ErrRecordTooLarge, size)
		}
		n += size
	}
	dst = slices.Grow(dst, n)[:len(dst)+n]
	out := dst[len(dst)-n:]
	for _, it := range items {
		size := BatchItemSize(it)
		putI32(out, OffTotalSize, int32(size))
		putI32(out, OffMagic, 0)
		putI32(out, OffBodyCRC, 0)
		putI32(out, batchOffFlag, it.Flag)
		putI32(out, batchOffBodyLen, int32(len(it.Body)))
		p := batchOffBody + copy(out[batchOffBody:], it.Body)
		putI16(out, p, int16(len(it.Properties)))
		copy(out[p+LenPropsLen:], it.Properties)
		out = out[size:]
	}
	return dst, nil
}
