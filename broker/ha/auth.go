package ha

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/acl/sig"
)

// With ACL on, the master challenges each slave connection and the slave
// answers with its broker account, before anything else (Sluice's, beyond
// RocketMQ, whose HA port is open to all):
//
//	slave → master: "SLAU" | version (2): 2 (the slave speaks first, so a
//	                TLS master fails a plaintext slave at once, and so does
//	                a master without ACL)
//	master → slave: "SLNC" | nonce (32 random bytes)
//	slave → master: key length (2) | access key | unix ms (8) | signature length (2) | signature
//
// where the signature is base64(HMAC-SHA1(secret, key | decimal unix ms |
// hex nonce | hex channel binding)). The nonce, fresh per connection, makes
// a recorded answer worthless on another connection; the channel binding,
// with TLS on, is 32 bytes of keying material exported from the TLS
// session (RFC 5705, label authLabel), so an answer obtained by relaying
// the challenge to a slave through a TLS session of one's own (a slave
// that does not verify its master's certificate) does not verify on the
// master's session. The master checks it with its ACL rules (an admin
// account, the time within authSkew) and closes the connection otherwise.
// With TLS on, the stream is TLS first (the broker's certificate).

const (
	authMagic      = "SLAU"
	challengeMagic = "SLNC"
	authVersion    = 2 // 1: the preamble alone, without a challenge
	authSkew       = 5 * time.Minute
	maxAuth        = 1024
)

// Credentials are a slave's broker account.
type Credentials struct{ Key, Secret string }

// nonceSize is the challenge's random bytes.
const nonceSize = 32

// authLabel is the TLS exporter label of the channel binding.
const authLabel = "EXPORTER-sluice-ha-auth"

// authContent is what an auth preamble signs.
func authContent(key string, ms int64, nonce, binding []byte) []byte {
	b := strconv.AppendInt(append([]byte(key), '|'), ms, 10)
	b = hex.AppendEncode(append(b, '|'), nonce)
	return hex.AppendEncode(append(b, '|'), binding)
}

// channelBinding is c's TLS keying material (nil for a plaintext c).
func channelBinding(c net.Conn) ([]byte, error) {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil, nil
	}
	cs := tc.ConnectionState()
	b, err := cs.ExportKeyingMaterial(authLabel, nil, 32)
	if err != nil {
		return nil, fmt.Errorf("ha: TLS channel binding: %w", err)
	}
	return b, nil
}

// sendChallenge writes a master's challenge and returns its nonce.
func sendChallenge(w io.Writer) ([]byte, error) {
	b := make([]byte, 4+nonceSize)
	copy(b, challengeMagic)
	if _, err := rand.Read(b[4:]); err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	return b[4:], nil
}

// readChallenge reads a master's challenge and returns its nonce.
func readChallenge(r io.Reader) ([]byte, error) {
	b := make([]byte, 4+nonceSize)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("ha: no challenge from the master (is ACL on there too?): %w", err)
	}
	if string(b[:4]) != challengeMagic {
		return nil, errors.New("ha: the master sent no challenge (ACL is off there, or an older Sluice): its ACL must match this broker's")
	}
	return b[4:], nil
}

// sendAuth writes a slave's auth preamble for the master's challenge
// nonce on a connection of binding.
func sendAuth(w io.Writer, c Credentials, now time.Time, nonce, binding []byte) error {
	ms := now.UnixMilli()
	signature := sig.Sign(c.Secret, authContent(c.Key, ms, nonce, binding))
	b := make([]byte, 0, 12+len(c.Key)+len(signature))
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

// readAuth reads and checks an auth preamble answering the challenge
// nonce on a connection of binding with check (the master's ACL),
// returning the access key.
func readAuth(r io.Reader, now time.Time, nonce, binding []byte,
	check func(key string, content []byte, signature string) bool) (string, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", err
	}
	n := int(binary.BigEndian.Uint16(hdr[:]))
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
	if !check(k, authContent(k, ms, nonce, binding), string(signature)) {
		return k, fmt.Errorf("%w: access key %s: unknown, not an admin (broker) account, a wrong signature, "+
			"or an answer to another connection's challenge (replayed or relayed)", errAuth, k)
	}
	return k, nil
}

// secure wraps a master's side of a slave connection: TLS, then the
// challenge and the auth preamble. nil means the connection was refused
// (and closed).
func (m *Master) secure(c net.Conn) net.Conn {
	if m.opts.TLS != nil {
		tc := tls.Server(c, m.opts.TLS)
		tc.SetDeadline(time.Now().Add(m.opts.ReportTimeout))
		if err := tc.Handshake(); err != nil {
			m.opts.Logger.Warn("ha: slave refused: TLS handshake", "slave", c.RemoteAddr().String(), "err", err)
			tc.Close()
			return nil
		}
		tc.SetDeadline(time.Time{})
		c = tc
	}
	if m.opts.Authenticate == nil {
		return c
	}
	c.SetDeadline(time.Now().Add(m.opts.ReportTimeout))
	key, err := m.challenge(c)
	if err != nil {
		m.authFailures.Add(1)
		m.opts.Logger.Warn("ha: slave refused", "slave", c.RemoteAddr().String(), "access_key", key, "err", err)
		c.Close()
		return nil
	}
	c.SetDeadline(time.Time{})
	return c
}

// challenge challenges c and checks its answer.
func (m *Master) challenge(c net.Conn) (string, error) {
	var req [6]byte
	if _, err := io.ReadFull(c, req[:]); err != nil {
		return "", err
	}
	if string(req[:4]) != authMagic {
		return "", fmt.Errorf("%w: no account (ACL is on: the slave needs acl.file, acl.access_key and acl.secret_key)", errAuth)
	}
	if v := binary.BigEndian.Uint16(req[4:]); v != authVersion {
		return "", fmt.Errorf("%w: auth version %d, this master speaks %d (upgrade the slave)", errAuth, v, authVersion)
	}
	binding, err := channelBinding(c)
	if err != nil {
		return "", err
	}
	nonce, err := sendChallenge(c)
	if err != nil {
		return "", err
	}
	return readAuth(c, time.Now(), nonce, binding, m.opts.Authenticate)
}

// secureDial is a slave's side: TLS, then the answer to the master's
// challenge.
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
		c.SetDeadline(time.Now().Add(s.opts.ReadTimeout))
		err := s.answer(c)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.SetDeadline(time.Time{})
	}
	return c, nil
}

// answer reads the master's challenge and answers it.
func (s *Slave) answer(c net.Conn) error {
	if _, err := c.Write(binary.BigEndian.AppendUint16([]byte(authMagic), authVersion)); err != nil {
		return err
	}
	binding, err := channelBinding(c)
	if err != nil {
		return err
	}
	nonce, err := readChallenge(c)
	if err != nil {
		return err
	}
	return sendAuth(c, *s.opts.Credentials, time.Now(), nonce, binding)
}
