package v5

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// tlsHandshakeByte starts every TLS connection (a handshake record).
const tlsHandshakeByte = 0x16

// errPlaintextRefused is the handshake error of a plaintext connection to
// an enforcing server.
var errPlaintextRefused = errors.New("v5: plaintext connection refused: this port takes TLS only (tls.mode enforcing)")

// sniffCreds are transport credentials that take TLS and, unless
// enforcing, plaintext on one port: the handshake reads the first byte
// without losing it. grpc runs each handshake on the connection's own
// goroutine, bounded by its connection timeout.
type sniffCreds struct {
	tls       *tls.Config // nil: plaintext only
	enforcing bool
}

// plainInfo is the AuthInfo of a plaintext connection.
type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }

// peekConn is a connection whose first bytes were read into r.
type peekConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (s *sniffCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	r := bufio.NewReaderSize(raw, 1024)
	first, err := r.Peek(1)
	if err != nil {
		return nil, nil, err
	}
	conn := &peekConn{Conn: raw, r: r}
	if first[0] != tlsHandshakeByte || s.tls == nil {
		if s.enforcing {
			return nil, nil, errPlaintextRefused
		}
		return conn, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	tc := tls.Server(conn, s.tls)
	if err := tc.HandshakeContext(context.Background()); err != nil {
		return nil, nil, err
	}
	return tc, credentials.TLSInfo{State: tc.ConnectionState(),
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (s *sniffCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("v5: server credentials only")
}

func (s *sniffCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "sniff"}
}

func (s *sniffCreds) Clone() credentials.TransportCredentials {
	c := *s
	return &c
}

func (s *sniffCreds) OverrideServerName(string) error { return nil }
