package s3_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/s3"
)

// DRV-10: S3 answers map to the objstore error kinds, by code first, then
// by status.
func TestErrorKinds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// the key is STATUS-CODE, e.g. /b/412-PreconditionFailed
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/b/"), "-", 2)
		status, _ := strconv.Atoi(parts[0])
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			fmt.Fprintf(w, `<?xml version="1.0"?><Error><Code>%s</Code><Message>m</Message></Error>`, parts[1])
		}
	}))
	defer srv.Close()
	store, err := s3.New(context.Background(), s3.Config{Endpoint: srv.URL, Bucket: "b", PathStyle: true, AccessKey: "a", SecretKey: "s", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cases := map[string]error{
		"404-NoSuchKey":                  objstore.ErrNotFound,
		"412-PreconditionFailed":         objstore.ErrPreconditionFailed,
		"409-ConditionalRequestConflict": objstore.ErrPreconditionFailed,
		"500-InternalError":              objstore.ErrTransient,
		"503-SlowDown":                   objstore.ErrTransient,
		"429-Whatever":                   objstore.ErrTransient,
		"404-NoSuchUpload":               objstore.ErrTransient,
		"403-AccessDenied":               objstore.ErrInvalid,
		"404-NoSuchBucket":               objstore.ErrInvalid,
		"400-Odd":                        objstore.ErrInvalid,
	}
	for key, want := range cases {
		_, err := store.Put(context.Background(), key, strings.NewReader("x"), objstore.CreateOnly())
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want kind %v", key, err, want)
		}
	}
	// If-Match on a missing object: AWS answers 404; it is a lost
	// precondition, not "not found".
	_, err = store.Put(context.Background(), "404-NoSuchKey", strings.NewReader("x"), objstore.IfMatch("e"))
	if !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Errorf("If-Match on a missing key: %v", err)
	}
}
