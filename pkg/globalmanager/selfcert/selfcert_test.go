package selfcert

import (
	"crypto/x509"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// A Secret whose certificate another CA signed than the one it holds (put
// together by hand, or half replaced) is reissued from its CA: what trusts
// the CA can verify what is served.
func TestACertificateItsCADidNotSignIsReissued(t *testing.T) {
	now := time.Now()
	good, err := generateTLSData(nil, nil, "test", []string{"127.0.0.1", "localhost", "di.example"}, now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := generateTLSData(nil, nil, "other", []string{"127.0.0.1", "localhost", "di.example"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if why := servingCertProblem(good, []string{"di.example"}, now); why != "" {
		t.Fatalf("a generated Secret has a problem: %s", why)
	}
	mixed := map[string][]byte{
		corev1.TLSCertKey: other[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: other[corev1.TLSPrivateKeyKey],
		CAKey: good[CAKey], caKeyKey: good[caKeyKey],
	}
	if why := servingCertProblem(mixed, []string{"di.example"}, now); why == "" {
		t.Fatal("a certificate another CA signed is taken as is")
	}

	kube := kubefake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "di-tls", Namespace: "ns"}, Type: corev1.SecretTypeTLS, Data: mixed})
	cert, ca, err := Secret{Client: kube, Namespace: "ns", Name: "di-tls", Hostnames: []string{"di.example"}, Subject: "test"}.Certificate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if string(ca) != string(good[CAKey]) {
		t.Error("the CA changed; it could sign a new certificate")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "di.example", Roots: roots}); err != nil {
		t.Errorf("the reissued certificate does not verify against the CA: %v", err)
	}
}
