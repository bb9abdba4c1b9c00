// Package quickstart keeps docs/quickstart.md true: every YAML manifest in it
// is applied as a server-side dry-run to the local control plane with the
// CRDs it uses installed, and its Gateway with the HTTPS listener goes
// through Envoy Gateway's translator (egctl x translate).
package quickstart

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/igw-dev/igw/internal/testenv"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// manifests are the objects of every ```yaml block of the quickstart, in order.
func manifests(t *testing.T) (blocks []string, objs []*unstructured.Unstructured) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "quickstart.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range yamlBlock.FindAllStringSubmatch(string(doc), -1) {
		blocks = append(blocks, m[1])
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(m[1]), 4096)
		for {
			var o map[string]any
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("a manifest of the quickstart does not parse: %v\n%s", err, m[1])
			}
			if len(o) > 0 {
				objs = append(objs, &unstructured.Unstructured{Object: o})
			}
		}
	}
	if len(blocks) < 5 {
		t.Fatalf("only %d YAML blocks in docs/quickstart.md", len(blocks))
	}
	return blocks, objs
}

func TestManifestsApply(t *testing.T) {
	env := testenv.StartFor(t, "the manifests are applied to the API server",
		testenv.Options{ExtraCRDDirs: append(testenv.ExternalCRDDirs, "config/crd/external/olm")})
	blocks, objs := manifests(t)
	// The namespaces the installs create (Helm's --create-namespace, OLM's own).
	namespaces := map[string]bool{"olm": true, "envoy-gateway-system": true}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			delete(namespaces, o.GetName())
			if _, err := env.Kubectl("create", "namespace", o.GetName()); err != nil {
				t.Fatal(err)
			}
		} else if ns := o.GetNamespace(); ns != "" && !namespaces[ns] {
			namespaces[ns] = true
		}
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			delete(namespaces, o.GetName())
		}
	}
	for ns := range namespaces {
		if _, err := env.Kubectl("create", "namespace", ns); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
			t.Fatal(err)
		}
	}
	for i, b := range blocks {
		file := filepath.Join(t.TempDir(), "block.yaml")
		if err := os.WriteFile(file, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := env.Kubectl("apply", "--server-side", "--dry-run=server", "-f", file)
		if err != nil {
			t.Errorf("block %d of docs/quickstart.md: %v\n%s", i+1, err, b)
			continue
		}
		if n := strings.Count(out, "serverside-applied"); n != strings.Count("\n"+b, "\nkind: ") {
			t.Errorf("block %d: %d objects applied:\n%s", i+1, n, out)
		}
	}
}

// TestHTTPSListenerTranslates runs the quickstart's GatewayClass, EnvoyProxy
// and Gateway, with a certificate Secret of the name it refers to, through
// Envoy Gateway's translator and checks that both listeners are programmed
// and that Envoy gets a TLS listener on 443 with the certificate.
func TestHTTPSListenerTranslates(t *testing.T) {
	egctl := egctlPath(t)
	_, objs := manifests(t)
	var input bytes.Buffer
	for _, o := range objs {
		switch o.GetKind() {
		case "GatewayClass", "Gateway":
		case "EnvoyProxy":
			if o.GetName() != "nlb" {
				continue
			}
		default:
			continue
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		input.WriteString("---\n")
		input.Write(data)
		input.WriteString("\n")
	}
	crt, key := selfSigned(t, "llm.example.com")
	input.WriteString(`---
{"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/tls","metadata":{"name":"inference-gateway-tls","namespace":"inference"},
 "data":{"tls.crt":"` + base64.StdEncoding.EncodeToString(crt) + `","tls.key":"` + base64.StdEncoding.EncodeToString(key) + `"}}
`)
	in := filepath.Join(t.TempDir(), "resources.yaml")
	if err := os.WriteFile(in, input.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(egctl, "x", "translate", "--from", "gateway-api", "--to", "gateway-api,xds", "-t", "all", "-o", "json", "-f", in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("egctl x translate: %v\n%s", err, stderr.String())
	}
	var res struct {
		Gateways []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Status   struct {
				Listeners []struct {
					Name       string                                           `json:"name"`
					Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
				} `json:"listeners"`
			} `json:"status"`
		} `json:"gateways"`
		XDS map[string]struct {
			Configs []json.RawMessage `json:"configs"`
		} `json:"xds"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Gateways) != 1 {
		t.Fatalf("translated %d gateways", len(res.Gateways))
	}
	programmed := map[string]bool{}
	for _, l := range res.Gateways[0].Status.Listeners {
		for _, c := range l.Conditions {
			if c.Type == "Programmed" {
				programmed[l.Name] = c.Status == "True"
				if c.Status != "True" {
					t.Errorf("listener %s not programmed: %s %s", l.Name, c.Reason, c.Message)
				}
			}
		}
	}
	if !programmed["http"] || !programmed["https"] {
		t.Errorf("programmed listeners %v, want http and https", programmed)
	}
	var dump string
	for _, x := range res.XDS {
		for _, c := range x.Configs {
			dump += string(c)
		}
	}
	// Envoy listens on the Gateway's port plus 10000 when it is privileged.
	for _, want := range []string{`"portValue":10443`, "envoy.transport_sockets.tls", "DownstreamTlsContext", "llm.example.com"} {
		if !strings.Contains(dump, want) {
			t.Errorf("the xDS for the HTTPS listener lacks %s", want)
		}
	}
}

func egctlPath(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "egctl.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/egctl.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func selfSigned(t *testing.T, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}
