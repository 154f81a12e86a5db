package incus

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
)

// serverConfig is the part of GET /1.0 the remote test reads.
type serverConfig struct {
	Config      map[string]string `json:"config"`
	Environment struct {
		Certificate string `json:"certificate"`
	} `json:"environment"`
}

// trustedClientCert writes a fresh client certificate and key to dir, adds
// it to the local incusd's trust store, and removes it when t ends.
func trustedClientCert(t *testing.T, local *Client, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "engenho-incus-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)

	ctx := testCtx(t)
	sum := sha256.Sum256(der)
	fingerprint := hex.EncodeToString(sum[:])
	_, err = local.call(ctx, request{method: http.MethodPost, path: "/1.0/certificates", body: map[string]any{
		"name": "engenho-test-" + fingerprint[:8], "type": "client", "certificate": base64.StdEncoding.EncodeToString(der),
	}})
	if err != nil {
		t.Fatalf("adding the test client certificate to the trust store: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := local.call(ctx, request{method: http.MethodDelete, path: "/1.0/certificates/" + fingerprint}); err != nil {
			t.Errorf("removing the test client certificate: %v", err)
		}
	})
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// DRV-5: the same driver works against a remote server over HTTPS with a
// client certificate (here the local incusd's loopback HTTPS listener,
// which setup.sh turns on), and an untrusted client is refused clearly.
func TestRemoteHTTPS(t *testing.T) {
	t.Parallel()
	local := needIncus(t)
	ctx := testCtx(t)
	var sc serverConfig
	if err := local.Client().get(ctx, "/1.0", nil, &sc); err != nil {
		t.Fatalf("GET /1.0: %v", err)
	}
	addr := sc.Config["core.https_address"]
	drivertest.Need(t, "incus", addr != "", "incusd has no core.https_address; bash drivers/incus/setup.sh sets 127.0.0.1:8443")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "server.crt")
	if err := os.WriteFile(caFile, []byte(sc.Environment.Certificate), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := trustedClientCert(t, local.Client(), dir)
	url := "https://" + addr

	d, err := New(Options{RemoteURL: url, ClientCert: certFile, ClientKey: keyFile, ServerCA: caFile, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("New over HTTPS: %v", err)
	}
	t.Cleanup(func() { d.Close() }) // after the instance's own cleanup
	name := create(t, d, shSpec(uniqueName("tls"), "echo over-https; sleep 3600", drivers.Labels{"t.via": "https"}))
	if err := d.Start(ctx, name); err != nil {
		t.Fatalf("Start over HTTPS: %v", err)
	}
	waitState(t, d, name, drivers.StateRunning)
	res, err := d.Exec(ctx, name, []string{"echo", "exec-over-https"})
	if err != nil || string(res.Stdout) != "exec-over-https\n" {
		t.Errorf("Exec over HTTPS: %+v %v", res, err)
	}
	// The local socket sees the same instance.
	if st, err := local.Inspect(ctx, name); err != nil || st.Labels["t.via"] != "https" {
		t.Errorf("instance made over HTTPS, seen locally: %+v %v", st, err)
	}

	// Another certificate the server does not trust: refused, named.
	otherDir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stranger"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, filepath.Join(otherDir, "c.crt"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(otherDir, "c.key"), "EC PRIVATE KEY", keyDER)
	_, err = New(Options{RemoteURL: url, ClientCert: filepath.Join(otherDir, "c.crt"), ClientKey: filepath.Join(otherDir, "c.key"), ServerCA: caFile})
	if !errors.Is(err, drivers.ErrInvalid) {
		t.Errorf("New with an untrusted certificate: %v, want ErrInvalid", err)
	}
}

// DRV-5: Options.Project selects the incus project: instances made there
// are invisible from the default project.
func TestProjectSelection(t *testing.T) {
	t.Parallel()
	local := needIncus(t)
	ctx := testCtx(t)
	project := uniqueName("proj")
	// Images and profiles come from the default project.
	_, err := local.Client().call(ctx, request{method: http.MethodPost, path: "/1.0/projects", body: map[string]any{
		"name": project, "config": map[string]string{"features.images": "false", "features.profiles": "false"},
	}})
	if err != nil {
		t.Fatalf("creating project %s: %v", project, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := local.Client().call(ctx, request{method: http.MethodDelete, path: "/1.0/projects/" + project}); err != nil {
			t.Errorf("deleting project %s: %v", project, err)
		}
	})
	d, err := New(Options{Project: project})
	if err != nil {
		t.Fatalf("New in project %s: %v", project, err)
	}
	t.Cleanup(func() { d.Close() }) // after the instance's own cleanup
	run := uniqueName("pr")
	name := create(t, d, shSpec(uniqueName("inproj"), "sleep 3600", drivers.Labels{"t.run": run}))
	in, err := d.Client().Instance(ctx, name)
	if err != nil || in.Project != project {
		t.Fatalf("instance in project: %+v %v, want project %s", in.Project, err, project)
	}
	if got, err := d.List(ctx, drivers.Labels{"t.run": run}); err != nil || len(got) != 1 {
		t.Errorf("List in the project: %v %v, want the one instance", got, err)
	}
	if got, err := local.List(ctx, drivers.Labels{"t.run": run}); err != nil || len(got) != 0 {
		t.Errorf("List in the default project: %v %v, want none", got, err)
	}
	if _, err := local.Inspect(ctx, name); !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("Inspect from the default project: %v, want ErrNotFound", err)
	}
}
