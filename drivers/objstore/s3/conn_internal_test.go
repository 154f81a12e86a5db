package s3

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/objstore"
)

// DRV-18: a body that ends cleanly but short of the length the server
// announced is an error, whatever the layers below made of it; one of
// unknown length, or of the right one, ends with a plain EOF.
func TestDRV18CheckedBody(t *testing.T) {
	read := func(body string, size int64) error {
		_, err := io.ReadAll(&checkedBody{rc: io.NopCloser(strings.NewReader(body)), key: "k", size: size})
		return err
	}
	if err := read("abc", 5); !errors.Is(err, objstore.ErrTransient) || !errors.Is(err, errShortBody) {
		t.Errorf("3 of 5 bytes: %v, want a transient short-body error", err)
	}
	if err := read("abc", 3); err != nil {
		t.Errorf("3 of 3 bytes: %v", err)
	}
	if err := read("abc", -1); err != nil {
		t.Errorf("3 bytes of unknown length: %v", err)
	}
}
