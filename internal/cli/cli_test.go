package cli

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOneLine(t *testing.T) {
	require.Equal(t, "a", OneLine(errors.New("a")))
	require.Equal(t, "conf: x; y", OneLine(errors.Join(errors.New("conf: x"), errors.New("  y\n"))))
	require.Equal(t, "bad: reason", OneLine(errors.New("bad:\nreason")))
}
