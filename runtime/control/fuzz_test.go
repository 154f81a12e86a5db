package control

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeRequest is the control protocol decoder's fuzz target (REL-2).
// Whatever the line, decoding never panics, an error is a bad_request or
// unknown_op with a message, and a request that decodes re-encodes to one
// that decodes to the same op, id and args.
func FuzzDecodeRequest(f *testing.F) {
	seeds := []string{
		`{"id":1,"op":"status"}`,
		`{"id":2,"op":"why","args":{"stack":"web","service":"api","slot":2}}`,
		`{"id":3,"op":"apply","args":{"files":[{"name":"a.yaml","content":"services: {}"}],"wait":true}}`,
		`{"id":4,"op":"chaos","args":{"kind":"kill","target":"web/api/1","params":{"signal":"9"}}}`,
		`{"id":5,"op":"reinit","args":{"what":"journal","epoch":7}}`,
		`{"id":6,"op":"restart-child","args":{"path":"root/stack:web"}}`,
		`{"id":7,"op":"scale","args":{"stack":"web","service":"api","replicas":"3"}}`,
		`{"id":8,"op":"cancel","args":{"id":3}}`,
		`{"id":9,"op":"events","args":{"since":18446744073709551615,"follow":true}}`,
		`{"id":1e3,"op":"status"}`, `{"id":0}`, `[]`, `null`, `{"id":1,"op":"status","args":null}`,
		`{"id":1,"op":"apply","args":{"files":[{"name":"a","content":"x","zz":1}]}}`,
		"{\"id\":1,\"op\":\"status\"}\r", "\x00", `{"id":1,"op":"status","id":2}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d, err := decode(line)
		if err != nil {
			if err.Code != CodeBadRequest && err.Code != CodeUnknownOp {
				t.Fatalf("decode error with code %s: %v", err.Code, err)
			}
			if err.Message == "" {
				t.Fatalf("decode error without a message")
			}
			return
		}
		if d.req.ID == 0 || d.spec == nil || d.args == nil {
			t.Fatalf("decoded request incomplete: %+v", d)
		}
		again, merr := json.Marshal(Request{ID: d.req.ID, Op: d.req.Op, Args: mustJSON(t, d.args)})
		if merr != nil {
			t.Fatal(merr)
		}
		d2, err2 := decode(again)
		if err2 != nil {
			t.Fatalf("re-encoded %s does not decode: %v", again, err2)
		}
		if d2.req.ID != d.req.ID || d2.req.Op != d.req.Op || !reflect.DeepEqual(d2.args, d.args) {
			t.Fatalf("round trip changed the request:\n%+v\n%+v", d, d2)
		}
	})
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
