package topic

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicemq/sluice/internal/statefile"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"orders", "%RETRY%cg", "a|b", "A_b-9", strings.Repeat("x", 127)} {
		require.NoError(t, ValidateName(ok), ok)
	}
	for _, bad := range []string{"", "a b", "a/b", "ü", strings.Repeat("x", 128), "a.b"} {
		require.ErrorIs(t, ValidateName(bad), ErrInvalidName, bad)
	}
}

func TestTable_PersistAndVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics")
	tb, err := Open(path)
	require.NoError(t, err)
	v0 := tb.Version()
	changed, err := tb.Put(Config{TopicName: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	require.NoError(t, err)
	require.True(t, changed)
	require.Greater(t, tb.Version().Counter, v0.Counter)
	changed, err = tb.Put(Config{TopicName: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	require.NoError(t, err)
	require.False(t, changed, "same config: no new version")
	c, created, err := tb.PutIfAbsent(Config{TopicName: "orders", ReadQueueNums: 1})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, int32(4), c.ReadQueueNums)
	_, err = tb.Put(Config{TopicName: "bad name"})
	require.ErrorIs(t, err, ErrInvalidName)

	tb2, err := Open(path)
	require.NoError(t, err)
	c, ok := tb2.Get("orders")
	require.True(t, ok)
	require.Equal(t, "SINGLE_TAG", c.TopicFilterType)
	require.Equal(t, tb.Version(), tb2.Version())
	deleted, err := tb2.Delete("orders")
	require.NoError(t, err)
	require.True(t, deleted)
	all, _ := tb2.All()
	require.Empty(t, all)
}

// blockingSave is a save seam that reports each call on entered and waits
// for release before it saves.
type blockingSave struct {
	entered chan struct{}
	release chan struct{}
}

func newBlockingSave() *blockingSave {
	return &blockingSave{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blockingSave) save(path string, v any) error {
	b.entered <- struct{}{}
	<-b.release
	return statefile.Save(path, v)
}

func TestTable_ReadersDoNotWaitForSave(t *testing.T) {
	tb, err := Open(filepath.Join(t.TempDir(), "topics"))
	require.NoError(t, err)
	_, err = tb.Put(Config{TopicName: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	require.NoError(t, err)
	bs := newBlockingSave()
	tb.save = bs.save
	putDone := make(chan error, 1)
	go func() {
		_, err := tb.Put(Config{TopicName: "payments", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6})
		putDone <- err
	}()
	<-bs.entered // the writer is inside its save (two fsyncs on a real disk)

	// What readers see while the save is in progress.
	type seen struct {
		orders, payments bool
		all              int
		created          bool
		err              error
	}
	read := make(chan seen, 1)
	go func() {
		var s seen
		_, s.orders = tb.Get("orders")
		_, s.payments = tb.Get("payments")
		all, _ := tb.All()
		s.all = len(all)
		_ = tb.Version()
		// NB: an existing topic is found without the writers' lock.
		_, s.created, s.err = tb.PutIfAbsent(Config{TopicName: "orders", ReadQueueNums: 1})
		read <- s
	}()
	var s seen
	select {
	case s = <-read:
	case <-time.After(10 * time.Second): // NB: a watchdog for the failure, not a wait for success
		close(bs.release)
		<-read
		<-putDone
		t.Fatal("readers waited for a save in progress")
	}
	close(bs.release)
	require.NoError(t, <-putDone)
	require.Equal(t, seen{orders: true, payments: false, all: 1}, s,
		"readers see the table as saved, not the change being saved")
	_, ok := tb.Get("payments")
	require.True(t, ok, "published once saved")
}

func TestTable_FailedSaveChangesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics")
	tb, err := Open(path)
	require.NoError(t, err)
	orders := Config{TopicName: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	_, err = tb.Put(orders)
	require.NoError(t, err)
	all0, v0 := tb.All()
	errDisk := errors.New("injected: no space left on device")
	tb.save = func(string, any) error { return errDisk }

	_, err = tb.Put(Config{TopicName: "payments", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
	require.ErrorIs(t, err, errDisk)
	_, _, err = tb.PutIfAbsent(Config{TopicName: "refunds", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
	require.ErrorIs(t, err, errDisk)
	changed := orders
	changed.Perm = 4
	_, err = tb.Put(changed)
	require.ErrorIs(t, err, errDisk)
	_, err = tb.Delete("orders")
	require.ErrorIs(t, err, errDisk)

	all, v := tb.All()
	require.Equal(t, all0, all, "memory as before the failed saves")
	require.Equal(t, v0, v, "no new version for changes not saved")
	for _, name := range []string{"payments", "refunds"} {
		_, ok := tb.Get(name)
		require.False(t, ok, name)
	}
	c, ok := tb.Get("orders")
	require.True(t, ok)
	require.Equal(t, int32(6), c.Perm)

	tb.save = statefile.Save // the disk is back
	_, err = tb.Put(Config{TopicName: "payments", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
	require.NoError(t, err)
	reopened, err := Open(path)
	require.NoError(t, err)
	all, v = reopened.All()
	require.Equal(t, []string{"orders", "payments"}, names(all), "the file has the saved changes only")
	require.Equal(t, v0.Counter+1, v.Counter)
}

func TestTable_ConcurrentWritersAllLand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics")
	tb, err := Open(path)
	require.NoError(t, err)
	v0 := tb.Version()
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tb.Put(Config{TopicName: fmt.Sprintf("t%02d", i), ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
			assert.NoError(t, err)
			_, _, err = tb.PutIfAbsent(Config{TopicName: fmt.Sprintf("a%02d", i%4), ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
			assert.NoError(t, err)
		}()
	}
	var last DataVersion
	for range 200 { // versions seen by a reader meanwhile never go back
		v := tb.Version()
		require.GreaterOrEqual(t, v.Counter, last.Counter)
		require.GreaterOrEqual(t, v.Timestamp, last.Timestamp)
		last = v
	}
	wg.Wait()
	all, v := tb.All()
	require.Len(t, all, n+4)
	require.Equal(t, v0.Counter+n+4, v.Counter, "one version per change")
	reopened, err := Open(path)
	require.NoError(t, err)
	all2, v2 := reopened.All()
	require.Equal(t, all, all2, "every change is in the file")
	require.Equal(t, v, v2)
}

func names(cs []Config) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.TopicName
	}
	return out
}

// TestAttributes_MessageType: updateTopic -a's changes set and remove
// message.type, refuse unknown keys, values and malformed changes, never
// modify the map they start from; a topic's attributes are saved, and an
// equal config with them is no change.
func TestAttributes_MessageType(t *testing.T) {
	got, err := ApplyAttributes(nil, "+message.type=FIFO")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"message.type": "FIFO"}, got)
	kept, err := ApplyAttributes(got, "")
	require.NoError(t, err)
	require.Equal(t, got, kept, "no change: kept")
	gone, err := ApplyAttributes(got, " -message.type ")
	require.NoError(t, err)
	require.Nil(t, gone)
	require.Equal(t, "FIFO", got["message.type"], "the map started from is not modified")
	for _, v := range MessageTypes {
		_, err := ApplyAttributes(nil, "+message.type="+v)
		require.NoError(t, err, v)
	}
	for bad, says := range map[string]string{
		"+message.type=fifo":                      `want one of NORMAL, FIFO, DELAY, TRANSACTION, MIXED`,
		"+message.type=":                          `want one of`,
		"+queue.type=BatchCQ":                     `unknown attribute "queue.type"`,
		"message.type=FIFO":                       `want +key=value or -key`,
		"+message.type":                           `want +key=value`,
		"-message.type=FIFO":                      `a removal takes no value`,
		"+message.type=FIFO,+message.type=NORMAL": `changed twice`,
		"+message.type=FIFO,,":                    `want +key=value or -key`,
	} {
		_, err := ApplyAttributes(nil, bad)
		require.ErrorIs(t, err, ErrAttribute, bad)
		require.ErrorContains(t, err, says, bad)
	}

	path := filepath.Join(t.TempDir(), "topics")
	tb, err := Open(path)
	require.NoError(t, err)
	c := Config{TopicName: "f", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, Attributes: map[string]string{"message.type": "FIFO"}}
	changed, err := tb.Put(c)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = tb.Put(Config{TopicName: "f", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6,
		Attributes: map[string]string{"message.type": "FIFO"}})
	require.NoError(t, err)
	require.False(t, changed, "alike, attributes included")
	_, err = tb.Put(Config{TopicName: "g", Attributes: map[string]string{"message.type": "BOGUS"}})
	require.ErrorIs(t, err, ErrAttribute)
	tb2, err := Open(path)
	require.NoError(t, err)
	back, ok := tb2.Get("f")
	require.True(t, ok)
	require.Equal(t, "FIFO", back.Attributes["message.type"])
}

// FuzzApplyAttributes: any change string is applied or refused with
// ErrAttribute, never a panic; what is applied holds only known keys and
// values, and the map started from is never modified.
func FuzzApplyAttributes(f *testing.F) {
	for _, s := range []string{"+message.type=FIFO", "-message.type", "+message.type=FIFO,-message.type", "+a=b", ",,", "+=", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, changes string) {
		cur := map[string]string{"message.type": "NORMAL"}
		got, err := ApplyAttributes(cur, changes)
		require.Equal(t, map[string]string{"message.type": "NORMAL"}, cur)
		if err != nil {
			require.ErrorIs(t, err, ErrAttribute)
			return
		}
		for k, v := range got {
			require.Equal(t, "message.type", k)
			require.Contains(t, MessageTypes, v)
		}
	})
}
