// Package statefile saves and loads Sluice's small state files (store
// checkpoint, consumer offsets, topic and group tables) crash-safely.
//
// Format: a msgpack document followed by a 4-byte big-endian CRC32 (IEEE) of
// it. Save writes a temp file, fsyncs it, renames it over the old file and
// fsyncs the directory, so a crash leaves either the old or the new version,
// never a torn one.
package statefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluicemq/sluice/internal/fsync"
)

// ErrCorrupt is returned by Load for a file whose checksum does not match.
var ErrCorrupt = errors.New("statefile: checksum mismatch")

// Save atomically replaces path with v encoded as msgpack plus a CRC.
func Save(path string, v any) error {
	body, err := msgpack.Marshal(v)
	if err != nil {
		return fmt.Errorf("statefile: encode %s: %w", filepath.Base(path), err)
	}
	body = binary.BigEndian.AppendUint32(body, crc32.ChecksumIEEE(body))
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("statefile: %w", err)
	}
	_, err = tmp.Write(body)
	if err == nil {
		err = fsync.Sync(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("statefile: save %s: %w", filepath.Base(path), err)
	}
	return fsync.SyncDir(dir)
}

// Load decodes path into v. A missing file returns an error matching
// fs.ErrNotExist; a damaged one ErrCorrupt.
func Load(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(b) < 4 {
		return fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, filepath.Base(path), len(b))
	}
	body := b[:len(b)-4]
	if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return fmt.Errorf("%w: %s", ErrCorrupt, filepath.Base(path))
	}
	if err := msgpack.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, filepath.Base(path), err)
	}
	return nil
}
