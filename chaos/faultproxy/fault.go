package faultproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Kind is what a fault does.
type Kind string

// The fault kinds (see the package comment).
const (
	Status    Kind = "status"
	Latency   Kind = "latency"
	Reset     Kind = "reset"
	Truncate  Kind = "truncate"
	Down      Kind = "down"
	Blackhole Kind = "blackhole"
)

// Kinds lists every kind, in a fixed order (for reports).
var Kinds = []Kind{Status, Latency, Reset, Truncate, Down, Blackhole}

// BeforeHeaders, as a Reset's After, cuts the connection once the target
// has answered but before any byte of its answer reaches the client: the
// request took effect and the client cannot know.
const BeforeHeaders int64 = -1

// Half, as a Truncate's After, keeps half of the body's declared length.
const Half int64 = -1

// Fault is one fault to arm. Build one with the constructors below and
// narrow it with Times, During and On; or fill the fields directly.
type Fault struct {
	Kind Kind
	// Method (empty: any) and PathPrefix (empty: any) select the requests
	// it applies to. Down takes neither: it acts on connections.
	Method     string
	PathPrefix string
	// Count is how many requests it applies to (0: no limit). For is how
	// long it stays armed (0: no limit). With neither it stays until
	// Disarm. Down and Blackhole take no Count.
	Count int
	For   time.Duration
	// Code, Header and Body are a Status fault's answer.
	Code   int
	Header http.Header
	Body   []byte
	// Delay is a Latency fault's wait before forwarding.
	Delay time.Duration
	// After is, for Reset, how many body bytes reach the client before the
	// cut (0: right after the headers; BeforeHeaders: nothing at all), and
	// for Truncate how many body bytes are kept (Half: half the declared
	// length; never the whole body).
	After int64
}

// Times limits f to n requests.
func (f Fault) Times(n int) Fault { f.Count = n; return f }

// During keeps f armed for d.
func (f Fault) During(d time.Duration) Fault { f.For = d; return f }

// On limits f to requests with this method (empty: any) and path prefix
// (empty: any).
func (f Fault) On(method, pathPrefix string) Fault {
	f.Method, f.PathPrefix = method, pathPrefix
	return f
}

// String names the fault for logs and reports.
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	switch f.Kind {
	case Status:
		fmt.Fprintf(&b, " %d", f.Code)
	case Latency:
		fmt.Fprintf(&b, " %s", f.Delay)
	case Reset, Truncate:
		fmt.Fprintf(&b, " after=%d", f.After)
	}
	if f.Method != "" || f.PathPrefix != "" {
		fmt.Fprintf(&b, " on %s %s", orAny(f.Method), orAny(f.PathPrefix))
	}
	if f.Count > 0 {
		fmt.Fprintf(&b, " x%d", f.Count)
	}
	if f.For > 0 {
		fmt.Fprintf(&b, " for %s", f.For)
	}
	return b.String()
}

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// check says what is wrong with f, if anything.
func (f Fault) check() error {
	if f.Count < 0 || f.For < 0 {
		return fmt.Errorf("fault %s: negative count or duration", f.Kind)
	}
	switch f.Kind {
	case Status:
		if f.Code < 200 || f.Code > 599 {
			return fmt.Errorf("fault status: code %d, want 200..599", f.Code)
		}
	case Latency:
		if f.Delay <= 0 {
			return fmt.Errorf("fault latency: delay %s, want > 0", f.Delay)
		}
	case Reset, Truncate:
		if f.After < -1 {
			return fmt.Errorf("fault %s: after %d, want >= -1", f.Kind, f.After)
		}
	case Down:
		if f.Method != "" || f.PathPrefix != "" {
			return fmt.Errorf("fault down: acts on connections, so it takes no method or path")
		}
		if f.Count != 0 {
			return fmt.Errorf("fault down: lasts a time (For) or until disarmed, not a count")
		}
	case Blackhole:
		if f.Count != 0 {
			return fmt.Errorf("fault blackhole: lasts a time (For) or until disarmed, not a count")
		}
	default:
		return fmt.Errorf("fault kind %q unknown (want one of %v)", f.Kind, Kinds)
	}
	return nil
}

// matches reports whether f applies to r.
func (f Fault) matches(r *http.Request) bool {
	return (f.Method == "" || strings.EqualFold(f.Method, r.Method)) && strings.HasPrefix(r.URL.Path, f.PathPrefix)
}

// StatusFault answers with code, header and body.
func StatusFault(code int, header http.Header, body []byte) Fault {
	return Fault{Kind: Status, Code: code, Header: header, Body: body}
}

// S3Error answers as an S3 server does: code with an XML <Error> body
// naming s3code, which the SDK reads (and retries on SlowDown,
// InternalError, ServiceUnavailable).
func S3Error(code int, s3code, message string) Fault {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><RequestId>faultproxy</RequestId></Error>`, s3code, message)
	return StatusFault(code, http.Header{"Content-Type": {"application/xml"}}, []byte(body))
}

// S3SlowDown is S3's 503 SlowDown (throttling).
func S3SlowDown() Fault {
	return S3Error(http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
}

// S3InternalError is S3's 500 InternalError.
func S3InternalError() Fault {
	return S3Error(http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
}

// IncusError answers as incusd does: code with its JSON error envelope
// ({"type":"error","error":...,"error_code":...}), which drivers/incus
// turns into an *incus.APIError.
func IncusError(code int, message string) Fault {
	body, _ := json.Marshal(map[string]any{
		"type": "error", "status": "", "status_code": 0, "operation": "",
		"error_code": code, "error": message, "metadata": nil,
	})
	return StatusFault(code, http.Header{"Content-Type": {"application/json"}}, body)
}

// LatencyFault delays each request it applies to by d.
func LatencyFault(d time.Duration) Fault { return Fault{Kind: Latency, Delay: d} }

// ResetFault forwards, then cuts the connection after `after` body bytes
// (0: after the headers; BeforeHeaders: before any byte of the answer).
func ResetFault(after int64) Fault { return Fault{Kind: Reset, After: after} }

// TruncateFault forwards a GET and ends its body after `keep` bytes (Half:
// half its length) with a clean close.
func TruncateFault(keep int64) Fault { return Fault{Kind: Truncate, After: keep} }

// DownFault refuses connections and cuts the open ones for d (0: until
// disarmed).
func DownFault(d time.Duration) Fault { return Fault{Kind: Down, For: d} }

// BlackholeFault never answers, for d (0: until disarmed).
func BlackholeFault(d time.Duration) Fault { return Fault{Kind: Blackhole, For: d} }
