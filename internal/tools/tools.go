//go:build tools

// Package tools pins modules the project depends on before code uses them.
package tools

import (
	_ "github.com/cloudwego/netpoll"
	_ "github.com/spf13/viper"
	_ "github.com/stretchr/testify/require"
	_ "github.com/vmihailenco/msgpack/v5"
	_ "go.uber.org/goleak"
)
