package platform_test

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
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tributary-cdp/tributary/platform"
)

// selfSigned makes a certificate for 127.0.0.1 that is its own CA, and writes its PEM to a file.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tributary test broker"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, path
}

// TestTLS connects to an embedded broker that speaks TLS with a private CA: trusted through
// KAFKA_TLS_CA_FILE, refused without it.
func TestTLS(t *testing.T) {
	cert, caFile := selfSigned(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tt := range []struct {
		name   string
		caFile string
		ok     bool
	}{{"with the CA file", caFile, true}, {"system roots only", "", false}} {
		t.Run(tt.name, func(t *testing.T) {
			s := platform.KafkaSettings{Brokers: c.ListenAddrs(), TLS: true, TLSCAFile: tt.caFile, ReplicationFactor: -1, Partitions: 1}
			cl, err := platform.NewKafkaClient(s, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err = cl.Ping(ctx)
			if tt.ok && err != nil {
				t.Errorf("Ping = %v, want success", err)
			}
			if !tt.ok && err == nil {
				t.Errorf("Ping succeeded against an untrusted certificate")
			}
		})
	}
}
