package edgehub

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

	"github.com/nereid-ml/nereid/pkg/globalmanager/selfcert"
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
	cert, caPEM, err := h.tlsSecret().Certificate(ctx)
	if err != nil {
		return tls.Certificate{}, err
	}
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

// tlsSecret is the Secret of the hub's generated certificate.
func (h *Hub) tlsSecret() selfcert.Secret {
	return selfcert.Secret{
		Client: h.client, Namespace: h.cfg.Namespace, Name: TLSSecretName, Hostnames: h.cfg.Hostnames, Subject: "nereid-edgehub",
		Own: func(m *metav1.ObjectMeta) bool { return OwnedBy(m, h.cfg.Owner.ref()) }, Clock: h.clock,
	}
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
