package incus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The JSON shapes below are the parts of incus's REST API (/1.0) this
// driver reads or writes; fields it does not use are left out.

// ServerInfo is GET /1.0.
type ServerInfo struct {
	APIVersion    string   `json:"api_version"`
	APIExtensions []string `json:"api_extensions"`
	Auth          string   `json:"auth"` // "trusted" when we may act
	Environment   struct {
		ServerName    string `json:"server_name"`
		ServerVersion string `json:"server_version"`
		KernelVersion string `json:"kernel_version"`
		Storage       string `json:"storage"`
		Project       string `json:"project"`
		// KernelFeatures: "idmapped_mounts" is "true" where binds can be
		// id-shifted.
		KernelFeatures map[string]string `json:"kernel_features"`
	} `json:"environment"`
}

// Instance is one entry of /1.0/instances (recursion=1 on a single
// instance, or recursion=2 on the list, adds State).
type Instance struct {
	Name            string                       `json:"name"`
	Status          string                       `json:"status"` // Running, Stopped, ...
	StatusCode      int                          `json:"status_code"`
	Type            string                       `json:"type"`
	Project         string                       `json:"project"`
	Config          map[string]string            `json:"config"`
	Devices         map[string]map[string]string `json:"devices"`
	ExpandedDevices map[string]map[string]string `json:"expanded_devices"`
	Profiles        []string                     `json:"profiles"`
	CreatedAt       time.Time                    `json:"created_at"`
	LastUsedAt      time.Time                    `json:"last_used_at"`
	State           *InstanceState               `json:"state"`
}

// InstanceState is GET /1.0/instances/NAME/state.
type InstanceState struct {
	Status     string    `json:"status"`
	StatusCode int       `json:"status_code"`
	Pid        int64     `json:"pid"`        // host pid of the container's init; 0 when stopped
	StartedAt  time.Time `json:"started_at"` // zero when stopped
	Processes  int64     `json:"processes"`
	CPU        struct {
		Usage int64 `json:"usage"` // nanoseconds since the container started
	} `json:"cpu"`
	Memory struct {
		Usage     int64 `json:"usage"`
		UsagePeak int64 `json:"usage_peak"`
	} `json:"memory"`
}

// InstanceSource is the image an instance is created from.
type InstanceSource struct {
	Type  string `json:"type"` // "image"
	Alias string `json:"alias,omitempty"`
}

// InstancesPost is the body of POST /1.0/instances.
type InstancesPost struct {
	Name     string                       `json:"name"`
	Type     string                       `json:"type"` // "container"
	Source   InstanceSource               `json:"source"`
	Config   map[string]string            `json:"config,omitempty"`
	Devices  map[string]map[string]string `json:"devices,omitempty"`
	Profiles []string                     `json:"profiles"`
}

// StatePut is the body of PUT /1.0/instances/NAME/state.
type StatePut struct {
	Action  string `json:"action"`            // start, stop, restart, freeze, unfreeze
	Timeout int    `json:"timeout,omitempty"` // seconds a clean stop may take
	Force   bool   `json:"force"`
}

// ExecPost is the body of POST /1.0/instances/NAME/exec. This client never
// uses websockets: RecordOutput keeps stdout and stderr in files under the
// instance's logs, named in the finished operation's metadata.
type ExecPost struct {
	Command      []string          `json:"command"`
	Environment  map[string]string `json:"environment,omitempty"`
	WaitForWS    bool              `json:"wait-for-websocket"`
	Interactive  bool              `json:"interactive"`
	RecordOutput bool              `json:"record-output"`
	Cwd          string            `json:"cwd,omitempty"`
}

// Operation is a background operation (/1.0/operations/ID).
type Operation struct {
	ID         string         `json:"id"`
	Class      string         `json:"class"`
	Status     string         `json:"status"` // Running, Success, Failure, Cancelled
	StatusCode int            `json:"status_code"`
	Metadata   map[string]any `json:"metadata"`
	Err        string         `json:"err"`
	MayCancel  bool           `json:"may_cancel"`
}

// Operation status codes (incus api.StatusCode).
const (
	opSuccess   = 200
	opFailure   = 400
	opCancelled = 401
)

// Done reports whether the operation has finished one way or the other.
func (o *Operation) Done() bool { return o.StatusCode >= opSuccess }

// OperationError is a background operation that ended without success.
type OperationError struct {
	Op     string // what the operation did, e.g. "start web-1"
	Status string
	Err    string
}

func (e *OperationError) Error() string {
	return fmt.Sprintf("incus operation %s: %s: %s", e.Op, strings.ToLower(e.Status), e.Err)
}

// ImageAlias is GET /1.0/images/aliases/NAME.
type ImageAlias struct {
	Name   string `json:"name"`
	Target string `json:"target"` // image fingerprint
	Type   string `json:"type"`
}

// StoragePool is GET /1.0/storage-pools/NAME.
type StoragePool struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	Status string `json:"status"`
}

// Profile is GET /1.0/profiles/NAME.
type Profile struct {
	Name    string                       `json:"name"`
	Devices map[string]map[string]string `json:"devices"`
}

func instancePath(name string, rest ...string) string {
	p := "/1.0/instances/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Server returns GET /1.0.
func (c *Client) Server(ctx context.Context) (ServerInfo, error) {
	var s ServerInfo
	err := c.get(ctx, "/1.0", nil, &s)
	return s, err
}

// ImageAlias looks up an image alias; a missing alias is an *APIError 404.
func (c *Client) ImageAlias(ctx context.Context, alias string) (ImageAlias, error) {
	var a ImageAlias
	err := c.get(ctx, "/1.0/images/aliases/"+url.PathEscape(alias), nil, &a)
	return a, err
}

// StoragePool looks up a storage pool.
func (c *Client) StoragePool(ctx context.Context, name string) (StoragePool, error) {
	var p StoragePool
	err := c.get(ctx, "/1.0/storage-pools/"+url.PathEscape(name), nil, &p)
	return p, err
}

// Profile looks up a profile.
func (c *Client) Profile(ctx context.Context, name string) (Profile, error) {
	var p Profile
	err := c.get(ctx, "/1.0/profiles/"+url.PathEscape(name), nil, &p)
	return p, err
}

// Instance returns one instance with its state (recursion=1).
func (c *Client) Instance(ctx context.Context, name string) (Instance, error) {
	var in Instance
	err := c.get(ctx, instancePath(name), url.Values{"recursion": {"1"}}, &in)
	return in, err
}

// InstanceState returns GET /1.0/instances/NAME/state.
func (c *Client) InstanceState(ctx context.Context, name string) (InstanceState, error) {
	var st InstanceState
	err := c.get(ctx, instancePath(name, "state"), nil, &st)
	return st, err
}

// Instances lists the project's instances with their state (recursion=2),
// narrowed by filter when it is not empty (incus filter language, e.g.
// `config.user.engenho.stack eq "web"`).
func (c *Client) Instances(ctx context.Context, filter string) ([]Instance, error) {
	q := url.Values{"recursion": {"2"}}
	if filter != "" {
		q.Set("filter", filter)
	}
	var list []Instance
	err := c.get(ctx, "/1.0/instances", q, &list)
	return list, err
}

// async performs a call that answers with a background operation and
// waits for it to finish. what names the operation in errors.
func (c *Client) async(ctx context.Context, r request, what string) (*Operation, error) {
	env, err := c.call(ctx, r)
	if err != nil {
		return nil, err
	}
	if env.Type != "async" || env.Operation == "" {
		return nil, fmt.Errorf("incus %s %s: expected a background operation, got a %s answer", r.method, r.path, env.Type)
	}
	return c.Wait(ctx, env.Operation, what)
}

// Wait waits for the operation at opPath (/1.0/operations/ID) until it is
// done or ctx ends; it asks incusd to hold each request at most 30s so a
// cancelled ctx is noticed. A failed or cancelled operation is returned
// together with an *OperationError.
func (c *Client) Wait(ctx context.Context, opPath, what string) (*Operation, error) {
	for {
		timeout := 30 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl); left < timeout {
				timeout = max(left, time.Second)
			}
		}
		var op Operation
		q := url.Values{"timeout": {strconv.Itoa(int(timeout / time.Second))}}
		if err := c.get(ctx, opPath+"/wait", q, &op); err != nil {
			// incusd answers /wait of a failed operation with the
			// operation's error; fetch the operation for its metadata.
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status == http.StatusNotFound {
				return nil, err
			}
			if gerr := c.get(ctx, opPath, nil, &op); gerr != nil || !op.Done() {
				return nil, &OperationError{Op: what, Status: "Failure", Err: ae.Message}
			}
		}
		if !op.Done() {
			if err := ctx.Err(); err != nil {
				return &op, fmt.Errorf("incus operation %s: %w", what, err)
			}
			continue
		}
		if op.StatusCode != opSuccess {
			return &op, &OperationError{Op: what, Status: op.Status, Err: op.Err}
		}
		return &op, nil
	}
}

// CancelOperation asks incusd to cancel an operation (best effort: not
// every operation may be cancelled).
func (c *Client) CancelOperation(ctx context.Context, opPath string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: opPath})
	return err
}

// CreateInstance creates an instance and waits until it exists.
func (c *Client) CreateInstance(ctx context.Context, post InstancesPost) error {
	_, err := c.async(ctx, request{method: http.MethodPost, path: "/1.0/instances", body: post}, "create "+post.Name)
	return err
}

// SetState changes an instance's power state (start, stop with timeout or
// force, restart) and waits for it.
func (c *Client) SetState(ctx context.Context, name string, put StatePut) error {
	_, err := c.async(ctx, request{method: http.MethodPut, path: instancePath(name, "state"), body: put}, put.Action+" "+name)
	return err
}

// DeleteInstance deletes a stopped instance and waits for it.
func (c *Client) DeleteInstance(ctx context.Context, name string) error {
	_, err := c.async(ctx, request{method: http.MethodDelete, path: instancePath(name)}, "delete "+name)
	return err
}

// PatchInstance merges config keys and devices into an instance (PATCH).
// A device set to an empty map is not removed by PATCH; use UpdateInstance
// for removals.
func (c *Client) PatchInstance(ctx context.Context, name string, config map[string]string, devices map[string]map[string]string) error {
	body := map[string]any{}
	if config != nil {
		body["config"] = config
	}
	if devices != nil {
		body["devices"] = devices
	}
	_, err := c.call(ctx, request{method: http.MethodPatch, path: instancePath(name), body: body})
	return err
}

// ProxyDevice is a proxy device publishing a container port on the host:
// it listens at listen (e.g. "tcp:127.0.0.1:41234") on the host and
// connects to connect (e.g. "tcp:127.0.0.1:80") inside the container (spec
// DRV-6).
func ProxyDevice(listen, connect string) map[string]string {
	return map[string]string{"type": "proxy", "listen": listen, "connect": connect, "bind": "host"}
}

// ExecResult is a finished exec: its exit code and recorded output.
type ExecResult struct {
	Return int
	Stdout []byte
	Stderr []byte
}

// Exec runs post.Command in a running instance with record-output (no
// websocket), waits for it, and reads stdout and stderr from the instance's
// exec-output logs, which it then deletes. When ctx ends first the
// operation is cancelled where incusd allows it.
func (c *Client) Exec(ctx context.Context, name string, post ExecPost) (ExecResult, error) {
	post.RecordOutput = true
	post.WaitForWS = false
	post.Interactive = false
	env, err := c.call(ctx, request{method: http.MethodPost, path: instancePath(name, "exec"), body: post})
	if err != nil {
		return ExecResult{}, err
	}
	if env.Operation == "" {
		return ExecResult{}, fmt.Errorf("incus exec in %s: no operation in the answer", name)
	}
	op, err := c.Wait(ctx, env.Operation, "exec in "+name)
	if op == nil || !op.Done() {
		if op != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = c.CancelOperation(cctx, env.Operation)
			cancel()
		}
		return ExecResult{}, err
	}
	res := ExecResult{Return: -1}
	if v, ok := op.Metadata["return"].(float64); ok {
		res.Return = int(v)
	}
	out, _ := op.Metadata["output"].(map[string]any)
	stdout, _ := out["1"].(string)
	stderr, _ := out["2"].(string)
	// Read both files even when the operation failed, then remove them.
	var readErr error
	for _, f := range []struct {
		path string
		dst  *[]byte
	}{{stdout, &res.Stdout}, {stderr, &res.Stderr}} {
		if f.path == "" {
			continue
		}
		b, err := c.readAll(ctx, f.path)
		if err != nil && readErr == nil {
			readErr = err
		}
		*f.dst = b
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = c.call(dctx, request{method: http.MethodDelete, path: f.path})
		cancel()
	}
	if err != nil {
		return res, err
	}
	return res, readErr
}

// readAll GETs a file-like endpoint (path may carry its own query).
func (c *Client) readAll(ctx context.Context, path string) ([]byte, error) {
	resp, err := c.raw(ctx, request{method: http.MethodGet, path: path})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// InstanceLogs lists the instance's log files (/1.0/instances/NAME/logs:
// lxc.log and the like).
func (c *Client) InstanceLogs(ctx context.Context, name string) ([]string, error) {
	var files []string
	err := c.get(ctx, instancePath(name, "logs"), nil, &files)
	return files, err
}

// InstanceLog returns one of the instance's log files, e.g. "lxc.log".
func (c *Client) InstanceLog(ctx context.Context, name, file string) ([]byte, error) {
	return c.readAll(ctx, instancePath(name, "logs", url.PathEscape(file)))
}

// ConsoleLog returns the container console's log. While the instance runs
// incusd hands out what was written since the previous read (and appends it
// to its console.log); once stopped, the whole console.log.
func (c *Client) ConsoleLog(ctx context.Context, name string) ([]byte, error) {
	return c.readAll(ctx, instancePath(name, "console"))
}

func filesPath(name, path string) string {
	return instancePath(name, "files") + "?path=" + url.QueryEscape(path)
}

// FileRange is a read of part of a file inside an instance.
type FileRange struct {
	Data []byte
	Size int64 // the file's whole size, -1 when the server did not say
}

// ReadFile returns the file at path inside the instance (running or not),
// from byte offset on. Reading at or past the end returns no data and the
// file's size, so a caller following a file notices it was truncated.
func (c *Client) ReadFile(ctx context.Context, name, path string, offset int64) (FileRange, error) {
	r := request{method: http.MethodGet, path: filesPath(name, path)}
	if offset > 0 {
		r.headers = map[string]string{"Range": fmt.Sprintf("bytes=%d-", offset)}
	}
	resp, err := c.raw(ctx, r)
	if err != nil {
		return FileRange{}, err
	}
	defer resp.Body.Close()
	fr := FileRange{Size: -1}
	switch resp.StatusCode {
	case http.StatusRequestedRangeNotSatisfiable:
		fr.Size = rangeTotal(resp.Header.Get("Content-Range"))
		return fr, nil
	case http.StatusPartialContent:
		fr.Size = rangeTotal(resp.Header.Get("Content-Range"))
	case http.StatusOK:
		if offset > 0 { // the server ignored Range: cut it ourselves
			if _, err := io.CopyN(io.Discard, resp.Body, offset); err != nil {
				return fr, nil
			}
		}
	}
	fr.Data, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if fr.Size < 0 && resp.StatusCode == http.StatusOK {
		fr.Size = offset + int64(len(fr.Data))
	}
	return fr, err
}

// rangeTotal parses the total of a Content-Range header ("bytes a-b/N" or
// "bytes */N"); -1 when absent.
func rangeTotal(h string) int64 {
	i := strings.LastIndexByte(h, '/')
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseInt(h[i+1:], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// WriteFile creates or replaces the file at path inside the instance with
// data and mode (owned by root).
func (c *Client) WriteFile(ctx context.Context, name, path string, data []byte, mode int) error {
	_, err := c.call(ctx, request{
		method: http.MethodPost, path: filesPath(name, path), raw: strings.NewReader(string(data)),
		headers: map[string]string{
			"Content-Type": "application/octet-stream", "X-Incus-type": "file", "X-Incus-write": "overwrite",
			"X-Incus-mode": fmt.Sprintf("%04o", mode), "X-Incus-uid": "0", "X-Incus-gid": "0",
		},
	})
	return err
}

// MakeDir creates a directory at path inside the instance (no error when it
// exists).
func (c *Client) MakeDir(ctx context.Context, name, path string, mode int) error {
	_, err := c.call(ctx, request{
		method: http.MethodPost, path: filesPath(name, path),
		headers: map[string]string{
			"X-Incus-type": "directory", "X-Incus-mode": fmt.Sprintf("%04o", mode),
			"X-Incus-uid": "0", "X-Incus-gid": "0",
		},
	})
	return err
}
