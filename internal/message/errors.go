package message

import "errors"

// Sentinel errors. Callers test them with errors.Is; the returned errors wrap
// them with the field, the offending value and the limit.
var (
	// ErrMalformed marks a stored record that is not a well-formed v1 record:
	// wrong magic, impossible lengths, truncation. The wrapping text names the
	// field.
	ErrMalformed = errors.New("message: malformed record")

	// ErrCRC marks a record whose BODYCRC does not match its body.
	ErrCRC = errors.New("message: body CRC mismatch")

	// ErrMalformedBatch marks a SEND_BATCH_MESSAGE body that cannot be split
	// into items.
	ErrMalformedBatch = errors.New("message: malformed batch body")

	// ErrTopicEmpty is returned for a message without a topic.
	ErrTopicEmpty = errors.New("message: empty topic")

	// ErrTopicTooLong is returned for a topic longer than MaxTopicLen bytes.
	ErrTopicTooLong = errors.New("message: topic too long")

	// ErrPropertiesTooLong is returned for a properties string longer than
	// MaxPropertiesLen bytes.
	ErrPropertiesTooLong = errors.New("message: properties too long")

	// ErrBodyTooLarge is returned for a body (or an inflated body) above the
	// configured maximum.
	ErrBodyTooLarge = errors.New("message: body too large")

	// ErrRecordTooLarge is returned when the encoded record would not fit the
	// int32 TOTALSIZE field.
	ErrRecordTooLarge = errors.New("message: record too large")

	// ErrPropertiesNUL is returned for a properties string that ends with a
	// NUL byte: the store refuses it, so that recovery can tell a record
	// whose end a power loss zeroed (see Validate).
	ErrPropertiesNUL = errors.New("message: properties end with a NUL byte")

	// ErrInvalidHost is returned when a born or store host is not a valid
	// address.
	ErrInvalidHost = errors.New("message: invalid host address")

	// ErrBufferSize is returned by Encode when len(dst) differs from
	// EncodedSize.
	ErrBufferSize = errors.New("message: buffer size does not match encoded size")

	// ErrInvalidProperty is returned for a property name or value that cannot
	// be represented in a properties string.
	ErrInvalidProperty = errors.New("message: invalid property")

	// ErrInvalidMsgID is returned for an offset or unique message id that
	// cannot be parsed.
	ErrInvalidMsgID = errors.New("message: invalid message id")

	// ErrDecompress is returned when a compressed body cannot be inflated.
	ErrDecompress = errors.New("message: cannot decompress body")
)
