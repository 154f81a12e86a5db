package s3

import "github.com/rs/zerolog"

// MarshalZerologObject logs a Config without its secrets.
func (c Config) MarshalZerologObject(e *zerolog.Event) {
	e.Str("endpoint", c.Endpoint).Str("region", c.Region).Str("bucket", c.Bucket).
		Bool("path_style", c.PathStyle).Str("access_key", c.AccessKey).
		Bool("static_credentials", c.SecretKey != "")
}
