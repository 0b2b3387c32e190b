package edgehub

import (
	"bytes"
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
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Keys of the TLS Secret besides CAKey.
const (
	caKeyKey = "ca.key"
)

// Lifetimes of generated certificates. A serving certificate that expires
// within renewBefore, or lacks a configured name, is reissued from the stored
// CA when the hub starts.
const (
	caLifetime      = 10 * 365 * 24 * time.Hour
	servingLifetime = 365 * 24 * time.Hour
	renewBefore     = 30 * 24 * time.Hour
)

// servingCertificate returns the certificate the hub serves: from
// Config.CertFile, or from the TLS Secret, generated the first time (and
// reissued when it expires soon or lacks a name). The CA of a Secret's
// certificate is published in the CA ConfigMap and, if set, Config.CAOutFile.
func (h *Hub) servingCertificate(ctx context.Context) (tls.Certificate, error) {
	if h.cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(h.cfg.CertFile, h.cfg.KeyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("loading serving certificate: %w", err)
		}
		return cert, nil
	}
	secret, err := h.ensureTLSSecret(ctx)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("reading serving certificate of secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	caPEM := secret.Data[CAKey]
	if err := h.publishCA(ctx, caPEM); err != nil {
		return tls.Certificate{}, err
	}
	if h.cfg.CAOutFile != "" {
		if err := writeFileAtomic(h.cfg.CAOutFile, caPEM); err != nil {
			return tls.Certificate{}, fmt.Errorf("writing CA file: %w", err)
		}
	}
	return cert, nil
}

// ensureTLSSecret reads the TLS Secret, creating or renewing it when needed.
// Replicas that race converge: a create that finds the Secret, or an update
// that conflicts, reads it again and uses what won.
func (h *Hub) ensureTLSSecret(ctx context.Context) (*corev1.Secret, error) {
	logger := klog.FromContext(ctx)
	secrets := h.client.CoreV1().Secrets(h.cfg.Namespace)
	names := h.certNames()
	for range 5 {
		now := h.now()
		secret, err := secrets.Get(ctx, TLSSecretName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			data, err := generateTLSData(nil, nil, names, now)
			if err != nil {
				return nil, err
			}
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: TLSSecretName, Namespace: h.cfg.Namespace},
				Type:       corev1.SecretTypeTLS,
				Data:       data,
			}
			OwnedBy(&s.ObjectMeta, h.cfg.Owner.ref())
			created, err := secrets.Create(ctx, s, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue // another replica made it first: use that one
			} else if err != nil {
				return nil, fmt.Errorf("creating secret %s/%s: %w", h.cfg.Namespace, TLSSecretName, err)
			}
			logger.Info("Generated the edge hub's CA and serving certificate", "secret", klog.KObj(created), "names", names)
			return created, nil
		case err != nil:
			return nil, fmt.Errorf("reading secret %s/%s: %w", h.cfg.Namespace, TLSSecretName, err)
		}
		why := servingCertProblem(secret.Data, names, now)
		renewed := secret.DeepCopy()
		owner := h.cfg.Owner.ref()
		owned := OwnedBy(&renewed.ObjectMeta, owner)
		if why == "" && !owned {
			return secret, nil
		}
		var ca *x509.Certificate
		if why != "" {
			var caKey *ecdsa.PrivateKey
			ca, caKey = usableCA(secret.Data, now)
			data, err := generateTLSData(ca, caKey, names, now)
			if err != nil {
				return nil, err
			}
			renewed.Data = data
		}
		updated, err := secrets.Update(ctx, renewed, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("renewing secret %s/%s: %w", h.cfg.Namespace, TLSSecretName, err)
		}
		if why == "" {
			logger.Info("Set the owner of the edge hub's Secret", "secret", klog.KObj(updated), "owner", klog.KRef(h.cfg.Namespace, owner.Name))
		} else {
			logger.Info("Renewed the edge hub's serving certificate", "secret", klog.KObj(updated), "why", why, "newCA", ca == nil)
		}
		return updated, nil
	}
	return nil, fmt.Errorf("secret %s/%s keeps changing under the edge hub", h.cfg.Namespace, TLSSecretName)
}

// certNames are the names a serving certificate must hold.
func (h *Hub) certNames() []string {
	names := []string{"127.0.0.1", "localhost"}
	for _, n := range h.cfg.Hostnames {
		if n != "" && !contains(names, n) {
			names = append(names, n)
		}
	}
	return names
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
func generateTLSData(ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string, now time.Time) (map[string][]byte, error) {
	notBefore := now.Add(-time.Hour) // tolerate clocks a little behind
	if ca == nil {
		var err error
		caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generating CA key: %w", err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serialNumber(),
			Subject:               pkix.Name{CommonName: "nereid-edgehub-ca"},
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
		Subject:      pkix.Name{CommonName: "nereid-edgehub"},
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

// publishCA writes caPEM into the CA ConfigMap, creating it or updating it
// when it says something else.
func (h *Hub) publishCA(ctx context.Context, caPEM []byte) error {
	cms := h.client.CoreV1().ConfigMaps(h.cfg.Namespace)
	for range 5 {
		cm, err := cms.Get(ctx, CAConfigMapName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: CAConfigMapName, Namespace: h.cfg.Namespace},
				Data:       map[string]string{CAKey: string(caPEM)},
			}
			OwnedBy(&cm.ObjectMeta, h.cfg.Owner.ref())
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			} else if err != nil {
				return fmt.Errorf("creating configmap %s/%s: %w", h.cfg.Namespace, CAConfigMapName, err)
			}
			return nil
		} else if err != nil {
			return fmt.Errorf("reading configmap %s/%s: %w", h.cfg.Namespace, CAConfigMapName, err)
		}
		cm = cm.DeepCopy()
		if owned := OwnedBy(&cm.ObjectMeta, h.cfg.Owner.ref()); cm.Data[CAKey] == string(caPEM) && !owned {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[CAKey] = string(caPEM)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("updating configmap %s/%s: %w", h.cfg.Namespace, CAConfigMapName, err)
		}
		return nil
	}
	return fmt.Errorf("configmap %s/%s keeps changing under the edge hub", h.cfg.Namespace, CAConfigMapName)
}

// writeFileAtomic replaces path with data, so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
