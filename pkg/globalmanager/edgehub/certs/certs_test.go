package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

const ns = "nereid-system"

// serving is the certificate served with cfg, in ns, kept with kube.
func serving(t *testing.T, kube *kubefake.Clientset, cfg Config) (tls.Certificate, error) {
	cfg.Client, cfg.Namespace = kube, ns
	return Serving(t.Context(), cfg)
}

func TestReplicasRacingConvergeOnOneGeneratedCertificate(t *testing.T) {
	kube := kubefake.NewClientset()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	cfg := Config{Hostnames: []string{"gm.example", "10.0.0.7"}, CAOutFile: caFile}

	const replicas = 4
	certs := make([][]byte, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			cert, err := serving(t, kube, cfg)
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
				return
			}
			certs[i] = cert.Certificate[0]
		})
	}
	wg.Wait()
	for i := 1; i < replicas; i++ {
		if string(certs[i]) != string(certs[0]) {
			t.Fatalf("replica %d serves another certificate than replica 0", i)
		}
	}

	secret, err := kube.CoreV1().Secrets(ns).Get(t.Context(), SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, CAKey} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("secret lacks %s", k)
		}
	}
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), CAConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[CAKey] != string(secret.Data[CAKey]) {
		t.Error("the ConfigMap's CA is not the Secret's")
	}
	written, err := os.ReadFile(caFile)
	if err != nil || string(written) != string(secret.Data[CAKey]) {
		t.Errorf("CA file %q (%v), want the Secret's CA", written, err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(secret.Data[CAKey])
	leaf, err := x509.ParseCertificate(certs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "localhost", "gm.example", "10.0.0.7"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("the certificate does not verify for %s: %v", name, err)
		}
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got < 364*24*time.Hour || got > 366*24*time.Hour {
		t.Errorf("the certificate is valid for %s, want a year", got)
	}
}

func TestCertificateLackingANameIsReissuedByTheSameCA(t *testing.T) {
	kube := kubefake.NewClientset()
	if _, err := serving(t, kube, Config{}); err != nil {
		t.Fatal(err)
	}
	before, err := kube.CoreV1().Secrets(ns).Get(t.Context(), SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cert, err := serving(t, kube, Config{Hostnames: []string{"gm.example"}})
	if err != nil {
		t.Fatal(err)
	}
	after, err := kube.CoreV1().Secrets(ns).Get(t.Context(), SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(after.Data[CAKey]) != string(before.Data[CAKey]) {
		t.Error("the CA changed; LocalControllers trusting it would be cut off")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(after.Data[CAKey])
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "gm.example", Roots: roots}); err != nil {
		t.Errorf("the reissued certificate does not verify for gm.example: %v", err)
	}
}
