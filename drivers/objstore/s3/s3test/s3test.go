package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/s3"
)

// The environment the real-server tests read (written by .ci/minio.sh).
const (
	EnvEndpoint  = "ENGENHO_S3_ENDPOINT"
	EnvBucket    = "ENGENHO_S3_BUCKET"
	EnvAccessKey = "ENGENHO_S3_ACCESS_KEY"
	EnvSecretKey = "ENGENHO_S3_SECRET_KEY"
	EnvRegion    = "ENGENHO_S3_REGION"
)

// ConfigFromEnv reads the real server's config; ok is false without an
// endpoint.
func ConfigFromEnv() (cfg s3.Config, ok bool) {
	cfg = s3.Config{
		Endpoint:  os.Getenv(EnvEndpoint),
		Bucket:    os.Getenv(EnvBucket),
		AccessKey: os.Getenv(EnvAccessKey),
		SecretKey: drivers.Secret(os.Getenv(EnvSecretKey)),
		Region:    os.Getenv(EnvRegion),
		PathStyle: true,
	}
	if cfg.Bucket == "" {
		cfg.Bucket = "engenho-test"
	}
	return cfg, cfg.Endpoint != ""
}

// RealStore returns a store on the real server and a fresh key prefix for
// this test, whose objects are deleted when the test ends. It skips (or,
// under ENGENHO_REQUIRE=s3, fails) without a server.
func RealStore(t testing.TB, tune func(*s3.Config)) (*s3.Store, string) {
	t.Helper()
	cfg, ok := ConfigFromEnv()
	drivertest.Need(t, "s3", ok, EnvEndpoint+" not set (run: eval \"$(bash .ci/minio.sh start)\")")
	if tune != nil {
		tune(&cfg)
	}
	store, err := s3.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("s3 store from env: %v", err)
	}
	prefix := uniquePrefix(t)
	t.Cleanup(func() {
		deleteAll(t, store, prefix)
		store.Close()
	})
	return store, prefix
}

// Real is RealStore seen through its prefix.
func Real(t testing.TB, tune func(*s3.Config)) objstore.Store {
	store, prefix := RealStore(t, tune)
	return objstore.Prefixed(store, prefix)
}

// Fake returns a store on a fresh in-memory gofakes3 server.
func Fake(t testing.TB, tune func(*s3.Config)) *s3.Store {
	t.Helper()
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(faker.Server())
	t.Cleanup(srv.Close)
	cfg := s3.Config{
		Endpoint: srv.URL, Bucket: "engenho-test", PathStyle: true,
		AccessKey: "fake-access", SecretKey: "fake-secret", Region: "us-east-1",
	}
	if tune != nil {
		tune(&cfg)
	}
	store, err := s3.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("s3 store on gofakes3: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.EnsureBucket(context.Background()); err != nil {
		t.Fatalf("bucket on gofakes3: %v", err)
	}
	return store
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func uniquePrefix(t testing.TB) string {
	var b [6]byte
	rand.Read(b[:])
	name := unsafe.ReplaceAllString(t.Name(), "_")
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return "test/" + name + "-" + hex.EncodeToString(b[:])
}

func deleteAll(t testing.TB, store *s3.Store, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	infos, err := store.List(ctx, prefix+"/")
	if err != nil {
		t.Logf("cleaning %s: %v", prefix, err)
		return
	}
	for _, info := range infos {
		if err := store.Delete(ctx, info.Key, objstore.Always); err != nil {
			t.Logf("cleaning %s: %v", info.Key, err)
		}
	}
}
