package fsync

import (
	"testing"

	"github.com/sluicemq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }
