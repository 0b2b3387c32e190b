package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/selfcert"
)

// Names of the objects kept in Config.Namespace.
const (
	// SecretName is the Secret holding the generated serving certificate
	// (tls.crt, tls.key) and its CA (ca.crt, ca.key).
	SecretName = "nereid-edgehub-tls"
	// CAConfigMapName is the ConfigMap publishing the CA (key ca.crt) that
	// LocalControllers trust.
	CAConfigMapName = "nereid-edgehub-ca"
	// CAKey is the key of the CA certificate in the Secret and the ConfigMap.
	CAKey = selfcert.CAKey
)

// Config says where the certificate comes from and where its CA goes.
type Config struct {
	Client kubernetes.Interface
	// Namespace holds the Secret and the CA ConfigMap.
	Namespace string
	// CertFile and KeyFile, when set, are the certificate and its key, PEM;
	// nothing is generated or published then.
	CertFile, KeyFile string
	// Hostnames are the names and IP addresses LocalControllers reach the
	// hub by, put into a generated certificate.
	Hostnames []string
	// CAOutFile, when set, is where the CA's PEM is also written.
	CAOutFile string
	// Own, when set, adds the GlobalManager's owner reference to an
	// object's metadata and says whether it added one.
	Own func(*metav1.ObjectMeta) bool
	// Clock says when a certificate is issued and is due for renewal.
	Clock clock.PassiveClock
}

// Serving returns the certificate the hub serves: from Config.CertFile, or
// from the Secret SecretName, generated the first time (and reissued when
// it expires soon or lacks a name). The CA of a Secret's certificate is
// published in the CA ConfigMap and, if set, Config.CAOutFile.
func Serving(ctx context.Context, cfg Config) (tls.Certificate, error) {
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("loading serving certificate: %w", err)
		}
		return cert, nil
	}
	cert, caPEM, err := secret(cfg).Certificate(ctx)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := publishCA(ctx, cfg, caPEM); err != nil {
		return tls.Certificate{}, err
	}
	if cfg.CAOutFile != "" {
		if err := writeFileAtomic(cfg.CAOutFile, caPEM); err != nil {
			return tls.Certificate{}, fmt.Errorf("writing CA file: %w", err)
		}
	}
	return cert, nil
}

// secret is the Secret of the hub's generated certificate.
func secret(cfg Config) selfcert.Secret {
	return selfcert.Secret{
		Client: cfg.Client, Namespace: cfg.Namespace, Name: SecretName, Hostnames: cfg.Hostnames, Subject: "nereid-edgehub",
		Own: cfg.Own, Clock: cfg.Clock,
	}
}

// own adds the owner reference to m, when Config.Own is set, saying whether
// it added one.
func (cfg Config) own(m *metav1.ObjectMeta) bool {
	return cfg.Own != nil && cfg.Own(m)
}

// publishCA writes caPEM into the CA ConfigMap, creating it or updating it
// when it says something else.
func publishCA(ctx context.Context, cfg Config, caPEM []byte) error {
	cms := cfg.Client.CoreV1().ConfigMaps(cfg.Namespace)
	for range 5 {
		cm, err := cms.Get(ctx, CAConfigMapName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: CAConfigMapName, Namespace: cfg.Namespace},
				Data:       map[string]string{CAKey: string(caPEM)},
			}
			cfg.own(&cm.ObjectMeta)
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			} else if err != nil {
				return fmt.Errorf("creating configmap %s/%s: %w", cfg.Namespace, CAConfigMapName, err)
			}
			return nil
		} else if err != nil {
			return fmt.Errorf("reading configmap %s/%s: %w", cfg.Namespace, CAConfigMapName, err)
		}
		cm = cm.DeepCopy()
		if owned := cfg.own(&cm.ObjectMeta); cm.Data[CAKey] == string(caPEM) && !owned {
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
			return fmt.Errorf("updating configmap %s/%s: %w", cfg.Namespace, CAConfigMapName, err)
		}
		return nil
	}
	return fmt.Errorf("configmap %s/%s keeps changing under the edge hub", cfg.Namespace, CAConfigMapName)
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
