package nameserver

import "github.com/sluicemq/sluice/internal/remoting"

// Serving more than the nameserver's codes on its remoting server: mqnamesrv
// --controller serves the controller's there, so brokers reach both at the
// nameserver's --listen address.

// Handle serves code with h. It must be called before Start, for a code
// the nameserver does not serve itself.
func (s *Server) Handle(code int16, h remoting.Handler) { s.rs.Handle(code, h) }

// OnDisconnect adds hook to what runs when a connection closes. It must be
// called before Start.
func (s *Server) OnDisconnect(hook func(*remoting.Conn)) {
	s.disconnectHooks = append(s.disconnectHooks, hook)
}
