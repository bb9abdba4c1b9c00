// Package servingtlstest issues certificates for tests of TLS servers: a CA,
// serving certificates it signs for loopback, and clients that trust it.
package servingtlstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/igw-dev/igw/internal/servingtls"
)

// TB is the part of testing.TB the helpers need.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	TempDir() string
}

// CA signs serving certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, what a client is given to trust.
	PEM []byte
}

// NewCA makes a CA valid for a day.
func NewCA(t TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "igw test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("servingtlstest: CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("servingtlstest: CA: %v", err)
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func newKey(t TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("servingtlstest: key: %v", err)
	}
	return key
}

// Issue signs a serving certificate for 127.0.0.1, localhost and hosts; serial
// tells certificates apart. It returns the certificate and key in PEM.
func (ca *CA) Issue(t TB, serial int64, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "igw test server"},
		DNSNames: append([]string{"localhost"}, hosts...), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("servingtlstest: issue: %v", err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("servingtlstest: key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// WriteFiles issues a certificate with serial into files of a new directory
// and returns their paths.
func (ca *CA) WriteFiles(t TB, serial int64) servingtls.Files {
	t.Helper()
	dir := t.TempDir()
	f := servingtls.Files{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	ca.Rotate(t, f, serial)
	return f
}

// Rotate replaces f's certificate and key with a new one of serial.
func (ca *CA) Rotate(t TB, f servingtls.Files, serial int64) {
	t.Helper()
	cert, key := ca.Issue(t, serial)
	if err := os.WriteFile(f.KeyFile, key, 0o600); err != nil {
		t.Fatalf("servingtlstest: %v", err)
	}
	if err := os.WriteFile(f.CertFile, cert, 0o600); err != nil {
		t.Fatalf("servingtlstest: %v", err)
	}
}

// ClientConfig trusts the CA only.
func (ca *CA) ClientConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// DialOption makes a gRPC client trust the CA.
func (ca *CA) DialOption() grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(ca.ClientConfig()))
}

// ServedSerial opens a new TLS connection to addr and returns the serial of
// the certificate served, or the handshake's error.
func (ca *CA) ServedSerial(addr string) (int64, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, ca.ClientConfig())
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// CheckHealth makes one grpc.health.v1 call on addr, over TLS trusting ca
// when ca is not nil, in plaintext otherwise; the error is the call's.
func CheckHealth(addr string, ca *CA) error {
	transport := grpc.WithTransportCredentials(insecure.NewCredentials())
	if ca != nil {
		transport = ca.DialOption()
	}
	return Call(addr, transport, func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	})
}

// Call connects to addr with transport and makes call on the connection,
// within 10 s; the error is the connection's or the call's.
func Call(addr string, transport grpc.DialOption, call func(context.Context, *grpc.ClientConn) error) error {
	conn, err := grpc.NewClient(addr, transport)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return call(ctx, conn)
}

// CheckServes checks a server set up with files issued by ca (serial 1): a
// call over TLS trusting ca completes, a plaintext call fails, and once the
// files are rotated new connections are served the new certificate (serial
// 2) and calls still complete. call makes one call on a connection dialled
// with the option it is given.
func (ca *CA) CheckServes(t TB, addr string, files servingtls.Files, call func(grpc.DialOption) error) {
	t.Helper()
	if err := call(ca.DialOption()); err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	if err := call(grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
		t.Fatalf("a plaintext client completed a call")
	}
	if got, err := ca.ServedSerial(addr); err != nil || got != 1 {
		t.Fatalf("served serial %d (%v), want 1", got, err)
	}
	ca.Rotate(t, files, 2)
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := ca.ServedSerial(addr)
		if err == nil && got == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the rotation new connections are served serial %d (%v), want 2", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := call(ca.DialOption()); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
}
