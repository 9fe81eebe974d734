package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/internal/remoting"
)

// Standalone is a controller with its own remoting server: what
// mqcontroller runs.
type Standalone struct {
	rs    *remoting.Server
	front *Front
	node  *Node
}

// StartStandalone binds listen, then opens the node (advertising cfg's
// Advertise, or the bound address) and serves it.
func StartStandalone(listen string, opts remoting.ServerOptions, cfg Config) (*Standalone, error) {
	front := NewFront(cfg.Logger)
	opts.OnDisconnect = front.ConnClosed
	if opts.Logger == nil {
		opts.Logger = cfg.Logger
	}
	s := &Standalone{rs: remoting.NewServer(listen, opts), front: front}
	front.Install(s.rs.Handle)
	if err := s.rs.Start(); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = s.rs.Addr().String()
	}
	n, err := Open(cfg)
	if err != nil {
		_ = s.rs.Shutdown(context.Background())
		return nil, err
	}
	s.node = n
	front.Attach(n)
	return s, nil
}

// Addr is the remoting address served.
func (s *Standalone) Addr() string { return s.rs.Addr().String() }

// Node is the controller node.
func (s *Standalone) Node() *Node { return s.node }

// Close stops the node, then the remoting server.
func (s *Standalone) Close() error {
	err := s.node.Close()
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	return errors.Join(err, s.rs.Shutdown(ctx))
}
