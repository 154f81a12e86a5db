package backend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/backend"
	"github.com/engenho/engenho/drivers/objstore/s3"
)

func TestOpenFSDefault(t *testing.T) {
	state := t.TempDir()
	s, prefix, closeFn, err := backend.Open(context.Background(), backend.Config{}, state, clock.New())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if prefix != "engenho" {
		t.Fatalf("prefix %q", prefix)
	}
	if _, err := s.Put(context.Background(), "engenho/x", strings.NewReader("v"), objstore.CreateOnly()); err != nil {
		t.Fatal(err)
	}
}

func TestOpenS3(t *testing.T) {
	s, _, closeFn, err := backend.Open(context.Background(), backend.Config{Kind: "s3", S3: s3.Config{Endpoint: "http://127.0.0.1:1", Bucket: "b", AccessKey: "a", SecretKey: "s"}}, "", clock.New())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if _, ok := s.(*s3.Store); !ok {
		t.Fatalf("store %T", s)
	}
}

func TestOpenRejects(t *testing.T) {
	for name, cfg := range map[string]backend.Config{
		"unknown kind":    {Kind: "ftp"},
		"bad prefix":      {Prefix: "../up"},
		"s3 no bucket":    {Kind: "s3"},
		"fs no dir/state": {Kind: "fs"},
	} {
		if _, _, _, err := backend.Open(context.Background(), cfg, "", clock.New()); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}
