package consumequeue

import "errors"

var (
	// ErrClosed is returned by every operation on a closed Store or on a
	// Queue of a closed Store.
	ErrClosed = errors.New("consumequeue: closed")

	// ErrGap is returned by Queue.Put when index > Queue.Next(): an entry
	// would be missing in between. The dispatcher must not skip entries.
	ErrGap = errors.New("consumequeue: gap in queue offsets")

	// ErrMismatch is returned by Queue.Put when index < Queue.Next() and the
	// stored entry differs from the one being put: re-dispatch found a
	// different record at an offset that is already indexed.
	ErrMismatch = errors.New("consumequeue: entry differs from the stored one")

	// ErrOffsetBelowMin is returned by reads of a queue offset below
	// Queue.Min(): the entry was deleted by retention.
	ErrOffsetBelowMin = errors.New("consumequeue: offset below min")

	// ErrOffsetOverflow is returned by Queue.Entry for an offset at or beyond
	// Queue.Next().
	ErrOffsetOverflow = errors.New("consumequeue: offset at or beyond next")

	// ErrInvalidEntry is returned by Queue.Put for an entry with Pos < 0,
	// Size <= 0, or a Pos below the end of the previous entry (positions
	// in one queue only grow, because the commitlog is append-only).
	ErrInvalidEntry = errors.New("consumequeue: invalid entry")

	// ErrInvalidName is returned by Store.Queue for a topic that cannot be a
	// directory name or a negative queue id.
	ErrInvalidName = errors.New("consumequeue: invalid topic or queue id")

	// ErrCorrupt is returned by OpenStore when a queue directory cannot be
	// interpreted at all (file names not aligned to EntriesPerFile, or a file
	// longer than EntriesPerFile entries: usually EntriesPerFile changed).
	// Damage that recovery can repair (torn or zeroed tail) is not an error.
	ErrCorrupt = errors.New("consumequeue: corrupt")
)
