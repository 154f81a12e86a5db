// Package s3 is the object store on any S3 API server (spec DRV-10): AWS S3,
// MinIO, or gofakes3 in unit tests. It uses aws-sdk-go-v2 with the SDK's
// standard retryer; endpoint, region, path-style addressing and credentials
// come from Config, or from the AWS default chain (environment, shared
// config, instance role) where Config leaves them empty.
//
// Conditional puts go to the server as If-None-Match / If-Match on PutObject
// and on CompleteMultipartUpload. Bodies up to Config.PartSize go up in one
// PutObject; larger ones as a multipart upload, part by part, aborted if the
// body or a part fails, so a failed upload never replaces the old object.
//
// No call waits on the network forever (DRV-18): every connection fails a
// read or write that makes no progress for Config.IOTimeout (30s), which
// the SDK retries like any timeout, and an object's body that ends short of
// its Content-Length is an ErrTransient error, never a short object.
//
// Credentials never leave the SDK's signer: Config's secret fields are of
// type drivers.Secret, which prints, marshals and logs as "[redacted]", an endpoint
// with user info is refused, and the SDK's own logging carries no headers
// (SEC-2).
//
// Layer: drivers. It imports drivers/objstore only (and the AWS SDK).
package s3
