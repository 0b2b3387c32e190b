// Package selfcert keeps a serving certificate the GlobalManager made
// itself, with the CA that signed it, in a Secret of its namespace: the edge
// hub's (which LocalControllers trust through a published CA) and the DIJob
// replicas API's (whose CA goes into every DIJob pod). The first replica to
// need it generates it; replicas racing converge on what won; a certificate
// that expires within 30 days or lacks a name it must hold is reissued from
// the same CA, so what trusts the CA goes on trusting it.
package selfcert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Keys of the Secret besides the serving pair (tls.crt, tls.key).
const (
	// CAKey is the CA certificate, PEM.
	CAKey    = "ca.crt"
	caKeyKey = "ca.key"
)

// Lifetimes of generated certificates. A serving certificate that expires
// within renewBefore, or lacks a name it must hold, is reissued from the
// stored CA.
const (
	caLifetime      = 10 * 365 * 24 * time.Hour
	servingLifetime = 365 * 24 * time.Hour
	renewBefore     = 30 * 24 * time.Hour
)

// Secret says which Secret holds a certificate and what it must hold.
type Secret struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Hostnames are the DNS names and IP addresses clients reach the server
	// by; 127.0.0.1 and localhost are always held too.
	Hostnames []string
	// Subject is the serving certificate's common name; its CA's is
	// Subject + "-ca".
	Subject string
	// Own, when set, adds the GlobalManager's owner reference to the
	// Secret's metadata and says whether it added one (the Secret is then
	// updated even when its certificate is good).
	Own func(*metav1.ObjectMeta) bool
	// Clock says when a certificate is issued and whether it is due for
	// renewal; nil is the real clock.
	Clock clock.PassiveClock
}

// Names are the names the serving certificate must hold.
func (s Secret) Names() []string {
	names := []string{"127.0.0.1", "localhost"}
	for _, n := range s.Hostnames {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// Certificate returns the serving certificate and the CA's PEM, from the
// Secret, generated or reissued first when needed.
func (s Secret) Certificate(ctx context.Context) (tls.Certificate, []byte, error) {
	secret, err := s.Ensure(ctx)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("reading serving certificate of secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return cert, secret.Data[CAKey], nil
}

// Ensure reads the Secret, creating or renewing it when needed. Replicas
// that race converge: a create that finds the Secret, or an update that
// conflicts, reads it again and uses what won.
func (s Secret) Ensure(ctx context.Context) (*corev1.Secret, error) {
	logger := klog.FromContext(ctx)
	secrets := s.Client.CoreV1().Secrets(s.Namespace)
	names := s.Names()
	own := s.Own
	if own == nil {
		own = func(*metav1.ObjectMeta) bool { return false }
	}
	clk := s.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	for range 5 {
		now := clk.Now()
		secret, err := secrets.Get(ctx, s.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			data, err := generateTLSData(nil, nil, s.Subject, names, now)
			if err != nil {
				return nil, err
			}
			fresh := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
				Type:       corev1.SecretTypeTLS,
				Data:       data,
			}
			own(&fresh.ObjectMeta)
			created, err := secrets.Create(ctx, fresh, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue // another replica made it first: use that one
			} else if err != nil {
				return nil, fmt.Errorf("creating secret %s/%s: %w", s.Namespace, s.Name, err)
			}
			logger.Info("Generated a CA and serving certificate", "secret", klog.KObj(created), "names", names)
			return created, nil
		case err != nil:
			return nil, fmt.Errorf("reading secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		why := servingCertProblem(secret.Data, names, now)
		renewed := secret.DeepCopy()
		owned := own(&renewed.ObjectMeta)
		if why == "" && !owned {
			return secret, nil
		}
		var ca *x509.Certificate
		if why != "" {
			var caKey *ecdsa.PrivateKey
			ca, caKey = usableCA(secret.Data, now)
			data, err := generateTLSData(ca, caKey, s.Subject, names, now)
			if err != nil {
				return nil, err
			}
			renewed.Data = data
		}
		updated, err := secrets.Update(ctx, renewed, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("renewing secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		if why == "" {
			logger.Info("Set the owner of a certificate's Secret", "secret", klog.KObj(updated))
		} else {
			logger.Info("Renewed a serving certificate", "secret", klog.KObj(updated), "why", why, "newCA", ca == nil)
		}
		return updated, nil
	}
	return nil, fmt.Errorf("secret %s/%s keeps changing under the GlobalManager", s.Namespace, s.Name)
}

// servingCertProblem says why the Secret's serving certificate cannot be
// used as is, or "" when it can.
func servingCertProblem(data map[string][]byte, names []string, now time.Time) string {
	if _, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]); err != nil {
		return "the certificate or its key does not parse"
	}
	if len(data[CAKey]) == 0 {
		return "the CA certificate is missing"
	}
	cert, err := parseCertPEM(data[corev1.TLSCertKey])
	if err != nil {
		return "the certificate does not parse"
	}
	if now.Add(renewBefore).After(cert.NotAfter) {
		return "the certificate expires " + cert.NotAfter.Format(time.RFC3339)
	}
	for _, n := range names {
		if cert.VerifyHostname(n) != nil {
			return "the certificate does not hold " + n
		}
	}
	// What trusts the CA must be able to verify the certificate: one the CA
	// did not sign (a Secret put together by hand, half replaced) is made
	// again.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[CAKey]) {
		return "the CA certificate does not parse"
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return "the certificate does not verify against the CA: " + err.Error()
	}
	return ""
}

// usableCA returns the Secret's CA when it can sign a new serving
// certificate for long enough, or nils.
func usableCA(data map[string][]byte, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey) {
	ca, err := parseCertPEM(data[CAKey])
	if err != nil || !ca.IsCA || now.Add(servingLifetime).After(ca.NotAfter) {
		return nil, nil
	}
	block, _ := pem.Decode(data[caKeyKey])
	if block == nil {
		return nil, nil
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil
	}
	return ca, key
}

func parseCertPEM(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// generateTLSData makes a serving certificate for names, signed by ca (a
// new CA when ca is nil), and returns the Secret's data.
func generateTLSData(ca *x509.Certificate, caKey *ecdsa.PrivateKey, subject string, names []string, now time.Time) (map[string][]byte, error) {
	notBefore := now.Add(-time.Hour) // tolerate clocks a little behind
	if ca == nil {
		var err error
		caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generating CA key: %w", err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serialNumber(),
			Subject:               pkix.Name{CommonName: subject + "-ca"},
			NotBefore:             notBefore,
			NotAfter:              now.Add(caLifetime),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
		if err != nil {
			return nil, fmt.Errorf("creating CA certificate: %w", err)
		}
		if ca, err = x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("parsing CA certificate: %w", err)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(),
		Subject:      pkix.Name{CommonName: subject},
		NotBefore:    notBefore,
		NotAfter:     now.Add(servingLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding serving key: %w", err)
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return nil, fmt.Errorf("encoding CA key: %w", err)
	}
	return map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		CAKey:                   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		caKeyKey:                pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: caKeyDER}),
	}, nil
}

func serialNumber() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}
