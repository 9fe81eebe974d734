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
// BODYCRC is not served when check_crc_on_recover is on (the default), and
// is when it is off: found by the log's recovery (here without its
// checkpoint, so it scans the whole log), or by the catch-up dispatch after
// open (here without consume queues and index, so it dispatches the whole
// log). The live dispatcher does not check CRCs (the records are its own).
func TestStore_RecoveryChecksBodyCRC(t *testing.T) {
	for _, tc := range []struct {
		check bool
		by    string // what finds the record: "recovery" or "catch-up"
		bad   int    // which of the 10 records is corrupted
	}{
		// NB: recovery ends the log at the bad record (the last); the
		// catch-up dispatch skips that record alone (the first, which lies
		// before the log's checkpoint: recovery does not see it).
		{true, "recovery", 9}, {false, "recovery", 9},
		{true, "catch-up", 0}, {false, "catch-up", 0},
	} {
		check := tc.check
		t.Run(fmt.Sprint(tc.by, "/check=", check), func(t *testing.T) {
			dir := t.TempDir()
			c := testConf(dir)
			c.CheckCRCOnRecover = check
			s := mustOpen(t, c, testOpts())
			var bad PutResult
			for i := range 10 {
				r := mustPut(t, s, msg("crc", 0, fmt.Sprintf("body-%d-xxxxxxxx", i)))
				if i == tc.bad {
					bad = r
				}
			}
			waitDispatched(t, s)
			require.NoError(t, s.Close())

			if tc.by == "recovery" {
				// NB: without its checkpoint the log is scanned whole on open.
				require.NoError(t, os.Remove(filepath.Join(dir, "commitlog", "checkpoint")))
			} else {
				// NB: without them the whole log is dispatched again on open.
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue")))
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "index")))
			}
			seg := filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 0))
			data, err := os.ReadFile(seg)
			require.NoError(t, err)
			rec := data[bad.Pos : bad.Pos+int64(bad.Size)]
			marker := fmt.Sprintf("body-%d-", tc.bad)
			i := bytes.Index(rec, []byte(marker))
			require.Positive(t, i)
			rec[i+len(marker)] ^= 0x20 // NB: same length, so only the CRC can tell
			require.NoError(t, os.WriteFile(seg, data, 0o644))

			s = mustOpen(t, c, testOpts())
			defer s.Close()
			waitDispatched(t, s) // NB: also after a skipped record
			var want []string
			for i := range 10 {
				if i != tc.bad || !check {
					want = append(want, fmt.Sprintf("body-%d-xxxxxxxx", i))
				}
			}
			if !check {
				want[tc.bad] = fmt.Sprintf("body-%d-Xxxxxxxx", tc.bad) // NB: the flipped byte is served as is
			}
			got := bodies(t, get(t, s, "crc", 0, s.MinOffset("crc", 0), 32).Body)
			require.Equal(t, want, got)
		})
	}
}
