// Package tlscert builds the TLS configurations of Sluice's servers and
// tools: a server's certificate from PEM files or, when none is given, a
// self-signed one kept under the store directory; client certificate
// verification against a CA file; a client's verification against a CA
// file or the system pool.
package tlscert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicemq/sluice/conf"
	"github.com/sluicemq/sluice/internal/remoting"
)

// Names of the self-signed certificate's files under the store directory.
const (
	SelfSignedCert = "tls/self-signed.crt"
	SelfSignedKey  = "tls/self-signed.key"
)

// Issuer is a certificate that signs others (a CA), for Issue.
type Issuer struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// Issue makes a certificate for hosts (DNS names or IP addresses), valid
// for ten years, signed by parent or, when parent is nil, by itself. ca
// marks it a CA. It returns the PEM blocks and the issuer form.
func Issue(hosts []string, parent *Issuer, ca bool) (certPEM, keyPEM []byte, self *Issuer, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"Sluice"}, CommonName: "sluice"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), &Issuer{Cert: cert, Key: key}, nil
}

// selfSigned loads the self-signed certificate under dir, making it first
// if it is not there (made reports that). dir "" keeps it in memory.
func selfSigned(dir string) (cert tls.Certificate, made bool, err error) {
	if dir != "" {
		certFile, keyFile := filepath.Join(dir, SelfSignedCert), filepath.Join(dir, SelfSignedKey)
		if cert, err = tls.LoadX509KeyPair(certFile, keyFile); err == nil {
			return cert, false, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return cert, false, fmt.Errorf("tlscert: self-signed certificate in %s: %w", dir, err)
		}
	}
	host, _ := os.Hostname()
	certPEM, keyPEM, _, err := Issue([]string{"localhost", "127.0.0.1", "::1", host}, nil, false)
	if err != nil {
		return cert, false, fmt.Errorf("tlscert: make a self-signed certificate: %w", err)
	}
	if dir != "" {
		if err := os.MkdirAll(filepath.Join(dir, "tls"), 0o700); err != nil {
			return cert, false, fmt.Errorf("tlscert: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, SelfSignedKey), keyPEM, 0o600); err != nil {
			return cert, false, fmt.Errorf("tlscert: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, SelfSignedCert), certPEM, 0o644); err != nil {
			return cert, false, fmt.Errorf("tlscert: %w", err)
		}
	}
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	return cert, true, err
}

// Server returns the remoting TLS of settings t (nil when the mode is
// disabled). Without a certificate it uses a self-signed one under dir
// (made on first use; in memory when dir is "") and logs so.
func Server(t conf.TLS, dir string, log *slog.Logger) (*remoting.ServerTLS, error) {
	if t.Mode == "" || t.Mode == conf.TLSDisabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("tlscert: tls.cert %s / tls.key %s: %w", t.Cert, t.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	} else {
		cert, made, err := selfSigned(dir)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
		where := filepath.Join(dir, SelfSignedCert)
		if dir == "" {
			where = "memory only"
		}
		log.Warn("tls: no tls.cert given: serving a self-signed certificate (clients must skip verification or trust it)",
			"mode", t.Mode, "certificate", where, "made_now", made)
	}
	if t.ClientCA != "" {
		pool, err := loadPool(t.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("tlscert: tls.client_ca: %w", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return &remoting.ServerTLS{Mode: t.Mode, Config: cfg}, nil
}

// Client returns a client's TLS configuration: verified against the CAs
// in caFile, or the system pool when caFile is empty; insecure skips
// verification (self-signed test setups). certFile and keyFile, when
// given, are the client's own certificate.
func Client(caFile string, insecure bool, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // the user asked, for test setups
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("tlscert: --tls-ca: %w", err)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tlscert: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}
