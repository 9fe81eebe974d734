package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStore_RecoveryChecksBodyCRC: a record whose body no longer matches its
// BODYCRC ends the recovered log when check_crc_on_recover is on (the
// default), and is kept when it is off. The live dispatcher does not check
// CRCs (the records are its own); recovery does.
func TestStore_RecoveryChecksBodyCRC(t *testing.T) {
	for _, check := range []bool{true, false} {
		t.Run(fmt.Sprint("check=", check), func(t *testing.T) {
			dir := t.TempDir()
			c := testConf(dir)
			c.CheckCRCOnRecover = check
			s := mustOpen(t, c, testOpts())
			var last PutResult
			for i := range 10 {
				last = mustPut(t, s, msg("crc", 0, fmt.Sprintf("body-%d-xxxxxxxx", i)))
			}
			waitDispatched(t, s)
			require.NoError(t, s.Close())

			// NB: without its checkpoint the log is scanned whole on open.
			require.NoError(t, os.Remove(filepath.Join(dir, "commitlog", "checkpoint")))
			seg := filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 0))
			data, err := os.ReadFile(seg)
			require.NoError(t, err)
			rec := data[last.Pos : last.Pos+int64(last.Size)]
			i := bytes.Index(rec, []byte("body-9-"))
			require.Positive(t, i)
			rec[i+len("body-9-")] ^= 0x20 // NB: same length, so only the CRC can tell
			require.NoError(t, os.WriteFile(seg, data, 0o644))

			s = mustOpen(t, c, testOpts())
			defer s.Close()
			waitDispatched(t, s)
			want := 10
			if check {
				want = 9
			}
			require.Equal(t, int64(want), s.MaxOffset("crc", 0))
			require.Len(t, bodies(t, get(t, s, "crc", 0, 0, 32).Body), want)
		})
	}
}
