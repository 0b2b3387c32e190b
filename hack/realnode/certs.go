package realnode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// CA is the cluster's certificate authority (the out dir's certs/ca.crt and
// ca.key, which hack/lib/pki.sh made): the API server takes the client
// certificates it signs.
type CA struct {
	Cert    *x509.Certificate
	Key     any
	CertPEM []byte
}

// LoadCA reads the CA's certificate and key.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%s holds no PEM key", keyFile)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		var err1 error
		if key, err1 = x509.ParsePKCS1PrivateKey(kb.Bytes); err1 != nil {
			return nil, fmt.Errorf("parsing %s: %w", keyFile, errors.Join(err, err1))
		}
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// ClientCert issues a client certificate for user in groups, valid for a
// year, and returns it and its key in PEM.
func (ca *CA) ClientCert(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing a certificate for %s: %w", user, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// WriteKubeconfig writes a kubeconfig at file for user in groups, with a
// fresh client certificate, to the API server at server. The API server's
// certificate names 127.0.0.1 and kubernetes, not the gateway address a
// node dials: the kubeconfig checks it for the name kubernetes.
func (ca *CA) WriteKubeconfig(file, server, user string, groups ...string) error {
	cert, key, err := ca.ClientCert(user, groups...)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nereid"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca.CertPEM, TLSServerName: "kubernetes"}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["nereid"] = &clientcmdapi.Context{Cluster: "nereid", AuthInfo: user}
	cfg.CurrentContext = "nereid"
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, file)
}
