package s3_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/s3"
)

const (
	secret = "SECRETsecret-0123456789-do-not-leak"
	token  = "TOKENtoken-9876543210-do-not-leak"
)

func leaks(s string) bool { return strings.Contains(s, secret) || strings.Contains(s, token) }

// SEC-2: the config never shows its secrets, however it is printed,
// marshalled or logged.
func TestConfigRedactsSecrets(t *testing.T) {
	cfg := s3.Config{Endpoint: "http://127.0.0.1:1", Bucket: "b", AccessKey: "AKID", SecretKey: secret, SessionToken: token}
	var logged bytes.Buffer
	logger := zerolog.New(&logged)
	logger.Info().Object("s3", cfg).Interface("cfg", cfg).Msg("config")
	js, _ := json.Marshal(cfg)
	outputs := []string{
		fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%s", cfg.SecretKey),
		fmt.Sprintf("%q", cfg.SecretKey), fmt.Sprintf("%x", cfg.SecretKey), cfg.SecretKey.String(), string(js), logged.String(),
	}
	for i, out := range outputs {
		if leaks(out) {
			t.Errorf("output %d shows a secret: %s", i, out)
		}
	}
	if !strings.Contains(logged.String(), "AKID") || !strings.Contains(fmt.Sprintf("%+v", cfg), "[redacted]") {
		t.Fatalf("redacted output lost what it should show: %s", logged.String())
	}
	if cfg.SecretKey.Reveal() != secret {
		t.Fatal("Reveal lost the value")
	}
}

// SEC-2: credentials in the endpoint URL are refused, without echoing them.
func TestEndpointWithCredentialsRefused(t *testing.T) {
	for _, ep := range []string{"http://AKID:" + secret + "@127.0.0.1:9000", "ht!tp://" + secret} {
		_, err := s3.New(context.Background(), s3.Config{Endpoint: ep, Bucket: "b"})
		if !errors.Is(err, objstore.ErrInvalid) {
			t.Fatalf("endpoint accepted: %v", err)
		}
		if leaks(err.Error()) {
			t.Fatalf("error shows the secret: %v", err)
		}
	}
}

// SEC-2: signed requests that fail every way (access denied, server
// errors retried and logged, a dead server) produce errors and logs
// without the secret key or session token, though the requests were
// really signed with them.
func TestErrorsAndLogsDoNotLeak(t *testing.T) {
	var signed atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), "Credential=AKID/") && r.Header.Get("X-Amz-Security-Token") == token {
			signed.Add(1)
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "denied") {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<?xml version="1.0"?><Error><Code>SignatureDoesNotMatch</Code><Message>no</Message></Error>`)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<?xml version="1.0"?><Error><Code>ServiceUnavailable</Code><Message>busy</Message></Error>`)
	}))
	var logged bytes.Buffer
	logger := zerolog.New(&logged)
	store, err := s3.New(context.Background(), s3.Config{
		Endpoint: srv.URL, Bucket: "b", PathStyle: true, Region: "us-east-1",
		AccessKey: "AKID", SecretKey: secret, SessionToken: token, MaxAttempts: 2, Logger: &logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	var errs []error
	_, err = store.Get(ctx, "denied")
	errs = append(errs, err)
	_, err = store.Put(ctx, "k", strings.NewReader("v"), objstore.CreateOnly())
	errs = append(errs, err)
	errs = append(errs, store.Delete(ctx, "k", objstore.IfMatch("e")))
	_, err = store.List(ctx, "p/")
	errs = append(errs, err)
	srv.Close()
	_, err = store.Get(ctx, "k")
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("call %d succeeded against a failing server", i)
		}
		if leaks(err.Error()) || leaks(fmt.Sprintf("%+v", err)) {
			t.Fatalf("error %d shows a secret: %v", i, err)
		}
	}
	if !errors.Is(errs[0], objstore.ErrInvalid) || !errors.Is(errs[1], objstore.ErrTransient) || !errors.Is(errs[4], objstore.ErrTransient) {
		t.Fatalf("kinds: %v / %v / %v", errs[0], errs[1], errs[4])
	}
	if signed.Load() == 0 {
		t.Fatal("no request carried the credentials: the test proves nothing")
	}
	if !strings.Contains(logged.String(), "retry") {
		t.Fatalf("no retry was logged: %q", logged.String())
	}
	if leaks(logged.String()) {
		t.Fatalf("logs show a secret: %s", logged.String())
	}
}
