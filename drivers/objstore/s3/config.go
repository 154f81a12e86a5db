package s3

import (
	"fmt"
	"net/url"
	"time"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers"
)

// Defaults.
const (
	DefaultRegion      = "us-east-1"
	DefaultPartSize    = 16 << 20
	MinPartSize        = 5 << 20 // S3's floor for every part but the last
	DefaultMaxAttempts = 3       // the SDK standard retryer's default
	DefaultPageSize    = 1000
	// DefaultIOTimeout is how long a connection may make no progress (no
	// byte read or written) before the attempt fails.
	DefaultIOTimeout = 30 * time.Second
)

// Config says where the bucket is and how to reach it. Empty fields fall
// back to the AWS default chain (credentials, region) or the defaults above.
type Config struct {
	// Endpoint is the server's base URL, e.g. "http://127.0.0.1:9000";
	// empty means AWS itself. It must not carry user info.
	Endpoint string `mapstructure:"endpoint"`
	// Region; default from the AWS chain, or us-east-1 with an Endpoint.
	Region string `mapstructure:"region"`
	Bucket string `mapstructure:"bucket"`
	// PathStyle addresses ENDPOINT/BUCKET/KEY instead of BUCKET.ENDPOINT
	// (MinIO and most self-hosted servers want it).
	PathStyle bool `mapstructure:"path_style"`
	// AccessKey and SecretKey, when both set, are static credentials;
	// both empty means the AWS default chain.
	AccessKey    string         `mapstructure:"access_key"`
	SecretKey    drivers.Secret `mapstructure:"secret_key"`
	SessionToken drivers.Secret `mapstructure:"session_token"`
	// PartSize is the multipart threshold and part size; default 16 MiB.
	PartSize int64 `mapstructure:"part_size"`
	// MaxAttempts of the SDK standard retryer per call; default 3.
	MaxAttempts int `mapstructure:"max_attempts"`
	// IOTimeout: an attempt whose connection reads and writes nothing for
	// this long fails (a timeout, which the SDK retries): a server that
	// accepts and never answers, or stalls mid-body, cannot hold a call
	// that has no deadline of its own. It bounds each wait, not a whole
	// transfer. Default DefaultIOTimeout.
	IOTimeout time.Duration `mapstructure:"-"`
	// PageSize of List requests; default 1000 (tests lower it).
	PageSize int32 `mapstructure:"-"`
	// Logger, when set, receives the SDK's retry notices (never headers).
	Logger *zerolog.Logger `mapstructure:"-"`
}

// withDefaults fills defaults and checks the config.
func (c Config) withDefaults() (Config, error) {
	if c.Bucket == "" {
		return c, fmt.Errorf("s3: bucket not set")
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// The parse error may quote the URL; say only what is wrong.
			return c, fmt.Errorf("s3: endpoint must be an http or https URL with a host")
		}
		if u.User != nil {
			return c, fmt.Errorf("s3: endpoint must not carry credentials; set access_key and secret_key")
		}
		if c.Region == "" {
			c.Region = DefaultRegion
		}
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return c, fmt.Errorf("s3: access_key and secret_key must be set together")
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.PartSize < MinPartSize {
		return c, fmt.Errorf("s3: part_size %d below the S3 minimum %d", c.PartSize, MinPartSize)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.IOTimeout == 0 {
		c.IOTimeout = DefaultIOTimeout
	}
	if c.IOTimeout < 0 {
		return c, fmt.Errorf("s3: io timeout %s is negative", c.IOTimeout)
	}
	return c, nil
}
