package store

import (
	"os"

	"github.com/sluicemq/sluice/commitlog"
	"github.com/sluicemq/sluice/consumequeue"
	"github.com/sluicemq/sluice/consumequeue/keyindex"
)

// shareOpenFile gives the consume queues and the key index the commitlog's
// opener (Options.OpenFile), unless a test set theirs: every file of the
// store goes through one seam.
func (o *Options) shareOpenFile() {
	if o.OpenFile == nil {
		return
	}
	if o.ConsumeQueue.OpenFile == nil {
		o.ConsumeQueue.OpenFile = narrowOpen[consumequeue.File](o.OpenFile)
	}
	if o.KeyIndex.OpenFile == nil {
		o.KeyIndex.OpenFile = narrowOpen[keyindex.File](o.OpenFile)
	}
}

// narrowOpen turns a commitlog opener into one returning F, an interface
// with a subset of commitlog.File's methods (the type assertion cannot fail).
func narrowOpen[F any](open commitlog.OpenFileFunc) func(string, int, os.FileMode) (F, error) {
	return func(path string, flag int, perm os.FileMode) (F, error) {
		f, err := open(path, flag, perm)
		if err != nil {
			var none F
			return none, err
		}
		return any(f).(F), nil
	}
}
