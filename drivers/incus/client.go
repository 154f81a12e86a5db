package incus

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultSocket is where a local incusd listens.
const DefaultSocket = "/var/lib/incus/unix.socket"

// Client is a small typed client of the incus REST API (/1.0/...), spec
// DRV-5. It speaks HTTP over incusd's unix socket, or HTTPS with a client
// certificate to a remote server. Every request carries the project.
type Client struct {
	http    *http.Client
	base    string // "http://incus" for the socket, the server URL for HTTPS
	project string
	// where names the endpoint in errors: the socket path or the URL.
	where string
	local bool
}

// ClientConfig selects the server. With RemoteURL empty the client uses the
// unix socket (Socket, default DefaultSocket).
type ClientConfig struct {
	Socket    string
	RemoteURL string
	// ClientCert and ClientKey are PEM files of the client certificate the
	// remote server trusts; ServerCA, when set, is the PEM file the server's
	// certificate must chain to (its own certificate for a self-signed
	// server). Without it the system roots are used.
	ClientCert string
	ClientKey  string
	ServerCA   string
	Project    string
}

// NewClient builds a client. It does not contact the server.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.RemoteURL != "" {
		return newRemoteClient(cfg)
	}
	socket := cfg.Socket
	if socket == "" {
		socket = DefaultSocket
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{http: &http.Client{Transport: tr}, base: "http://incus", project: cfg.Project, where: socket, local: true}, nil
}

func newRemoteClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.RemoteURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("incus remote %q: want an https://HOST[:PORT] URL", cfg.RemoteURL)
	}
	if cfg.ClientCert == "" || cfg.ClientKey == "" {
		return nil, fmt.Errorf("incus remote %s: client certificate and key files are required", u.Host)
	}
	cert, err := tls.LoadX509KeyPair(cfg.ClientCert, cfg.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("incus remote %s: loading client certificate %s: %w", u.Host, cfg.ClientCert, err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.ServerCA != "" {
		pem, err := os.ReadFile(cfg.ServerCA)
		if err != nil {
			return nil, fmt.Errorf("incus remote %s: reading server CA: %w", u.Host, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("incus remote %s: %s holds no PEM certificate", u.Host, cfg.ServerCA)
		}
		tc.RootCAs = pool
	}
	tr := &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	base := strings.TrimRight(u.Scheme+"://"+u.Host, "/")
	return &Client{http: &http.Client{Transport: tr}, base: base, project: cfg.Project, where: base}, nil
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Where names the server: the socket path or the remote URL.
func (c *Client) Where() string { return c.where }

// APIError is an error answer from incusd.
type APIError struct {
	Status  int    // HTTP status / error_code
	Message string // incusd's error text
}

func (e *APIError) Error() string { return fmt.Sprintf("incus: %s (HTTP %d)", e.Message, e.Status) }

// UnreachableError means incusd did not answer at all: the socket is
// missing, refused the connection, or the remote could not be reached.
type UnreachableError struct {
	Where string
	Local bool
	Err   error
}

func (e *UnreachableError) Error() string {
	if e.Local {
		return fmt.Sprintf("incusd is not answering on %s (%v); start it with `mkdir -p /var/log/incus && /usr/libexec/incus/incusd --group root &`, or run `bash drivers/incus/setup.sh`", e.Where, e.Err)
	}
	return fmt.Sprintf("incus server %s is unreachable: %v", e.Where, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// envelope is the JSON body of every non-file answer.
type envelope struct {
	Type       string          `json:"type"` // sync, async, error
	Status     string          `json:"status"`
	StatusCode int             `json:"status_code"`
	Operation  string          `json:"operation"`
	ErrorCode  int             `json:"error_code"`
	Error      string          `json:"error"`
	Metadata   json.RawMessage `json:"metadata"`
}

// request is one call: method, path (with its own query, if any), extra
// query values, JSON body or raw body, and headers.
type request struct {
	method  string
	path    string
	query   url.Values
	body    any       // JSON-encoded when set
	raw     io.Reader // sent as is when set
	headers map[string]string
}

func (c *Client) url(path string, q url.Values) string {
	u := c.base + path
	if q == nil {
		q = url.Values{}
	}
	if c.project != "" && q.Get("project") == "" {
		q.Set("project", c.project)
	}
	if enc := q.Encode(); enc != "" {
		if strings.Contains(path, "?") {
			u += "&" + enc
		} else {
			u += "?" + enc
		}
	}
	return u
}

// send performs r and returns the raw response; the caller closes its body.
// Transport failures become *UnreachableError.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	var body io.Reader = r.raw
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("incus %s %s: encoding request: %w", r.method, r.path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.url(r.path, r.query), body)
	if err != nil {
		return nil, fmt.Errorf("incus %s %s: %w", r.method, r.path, err)
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("incus %s %s: %w", r.method, r.path, ctx.Err())
		}
		return nil, &UnreachableError{Where: c.where, Local: c.local, Err: err}
	}
	return resp, nil
}

// call performs r and decodes the envelope. An error answer becomes
// *APIError.
func (c *Client) call(ctx context.Context, r request) (*envelope, error) {
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&env); err != nil {
		if resp.StatusCode >= 400 {
			return nil, &APIError{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
		}
		return nil, fmt.Errorf("incus %s %s: decoding answer: %w", r.method, r.path, err)
	}
	if env.Type == "error" || resp.StatusCode >= 400 {
		code := env.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, &APIError{Status: code, Message: env.Error}
	}
	return &env, nil
}

// get decodes the metadata of a sync GET into out.
func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	env, err := c.call(ctx, request{method: http.MethodGet, path: path, query: q})
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(env.Metadata, out); err != nil {
		return fmt.Errorf("incus GET %s: decoding metadata: %w", path, err)
	}
	return nil
}

// raw performs a GET of a file-like endpoint and returns its body; an error
// answer (JSON) becomes *APIError.
func (c *Client) raw(ctx context.Context, r request) (*http.Response, error) {
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 && resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		defer resp.Body.Close()
		var env envelope
		msg := http.StatusText(resp.StatusCode)
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&env) == nil && env.Error != "" {
			msg = env.Error
		}
		return nil, &APIError{Status: resp.StatusCode, Message: msg}
	}
	return resp, nil
}

// IsNotFound reports whether err is incusd's 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// isServerError reports whether err is incusd answering with a 5xx.
func isServerError(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status >= 500
}
