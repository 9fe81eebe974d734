package ha

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/acl/sig"
)

// With ACL on, a slave opens its connection with its broker account, before
// anything else (Sluice's, beyond RocketMQ, whose HA port is open to all):
//
//	"SLAU" | key length (2) | access key | unix ms (8) | signature length (2) | signature
//
// where the signature is base64(HMAC-SHA1(secret, key | decimal unix ms)).
// The master checks it with its ACL rules (an admin account, the time within
// authSkew) and closes the connection otherwise. With TLS on, the stream is
// TLS first (the broker's certificate).

const (
	authMagic = "SLAU"
	authSkew  = 5 * time.Minute
	maxAuth   = 1024
)

// Credentials are a slave's broker account.
type Credentials struct{ Key, Secret string }

// authContent is what an auth preamble signs.
func authContent(key string, ms int64) []byte {
	return strconv.AppendInt(append([]byte(key), '|'), ms, 10)
}

// sendAuth writes a slave's auth preamble.
func sendAuth(w io.Writer, c Credentials, now time.Time) error {
	ms := now.UnixMilli()
	signature := sig.Sign(c.Secret, authContent(c.Key, ms))
	b := make([]byte, 0, 16+len(c.Key)+len(signature))
	b = append(b, authMagic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.Key)))
	b = append(b, c.Key...)
	b = binary.BigEndian.AppendUint64(b, uint64(ms))
	b = binary.BigEndian.AppendUint16(b, uint16(len(signature)))
	b = append(b, signature...)
	_, err := w.Write(b)
	return err
}

// errAuth marks a refused auth preamble.
var errAuth = errors.New("ha: replication refused")

// readAuth reads and checks an auth preamble with check (the master's
// ACL), returning the access key.
func readAuth(r io.Reader, now time.Time, check func(key string, content []byte, signature string) bool) (string, error) {
	var hdr [6]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", err
	}
	if string(hdr[:4]) != authMagic {
		return "", fmt.Errorf("%w: no account (ACL is on: the slave needs acl.access_key and acl.secret_key)", errAuth)
	}
	n := int(binary.BigEndian.Uint16(hdr[4:6]))
	if n == 0 || n > maxAuth {
		return "", fmt.Errorf("%w: access key of %d bytes", errAuth, n)
	}
	key := make([]byte, n+10)
	if _, err := io.ReadFull(r, key); err != nil {
		return "", err
	}
	ms := int64(binary.BigEndian.Uint64(key[n : n+8]))
	sl := int(binary.BigEndian.Uint16(key[n+8:]))
	if sl == 0 || sl > maxAuth {
		return "", fmt.Errorf("%w: signature of %d bytes", errAuth, sl)
	}
	signature := make([]byte, sl)
	if _, err := io.ReadFull(r, signature); err != nil {
		return "", err
	}
	k := string(key[:n])
	if d := now.Sub(time.UnixMilli(ms)); d > authSkew || d < -authSkew {
		return k, fmt.Errorf("%w: access key %s: the signed time is %v from the master's clock", errAuth, k, d.Round(time.Second))
	}
	if !check(k, authContent(k, ms), string(signature)) {
		return k, fmt.Errorf("%w: access key %s: unknown, not an admin (broker) account, or a wrong signature", errAuth, k)
	}
	return k, nil
}

// secure wraps a master's side of a slave connection: TLS, then the auth
// preamble. nil means the connection was refused (and closed).
func (m *Master) secure(c net.Conn) net.Conn {
	if m.opts.TLS != nil {
		c = tls.Server(c, m.opts.TLS)
	}
	if m.opts.Authenticate == nil {
		return c
	}
	c.SetReadDeadline(time.Now().Add(m.opts.ReportTimeout))
	key, err := readAuth(c, time.Now(), m.opts.Authenticate)
	if err != nil {
		m.authFailures.Add(1)
		m.opts.Logger.Warn("ha: slave refused", "slave", c.RemoteAddr().String(), "access_key", key, "err", err)
		c.Close()
		return nil
	}
	return c
}

// secureDial is a slave's side: TLS, then the auth preamble.
func (s *Slave) secureDial(c net.Conn) (net.Conn, error) {
	if s.opts.TLS != nil {
		tc := tls.Client(c, s.opts.TLS)
		tc.SetDeadline(time.Now().Add(s.opts.ReadTimeout))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, fmt.Errorf("ha: TLS with the master: %w", err)
		}
		tc.SetDeadline(time.Time{})
		c = tc
	}
	if s.opts.Credentials != nil {
		if err := sendAuth(c, *s.opts.Credentials, time.Now()); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}
