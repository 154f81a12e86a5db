package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/engenho/engenho/drivers/objstore"
)

// classify turns an SDK error into an objstore error of the right kind.
func classify(ctx context.Context, op, key string, err error) error {
	if ctx.Err() != nil {
		return objstore.Wrap(storeName, op, key, objstore.ErrTransient, ctx.Err())
	}
	return objstore.Wrap(storeName, op, key, kindOf(err), err)
}

// classifyCond is classify for a conditional call: a missing object under
// If-Match is a failed precondition (AWS answers 404, others 412).
func classifyCond(ctx context.Context, op, key string, cond objstore.Cond, err error) error {
	err = classify(ctx, op, key, err)
	if cond.IfMatch != "" && errors.Is(err, objstore.ErrNotFound) {
		return objstore.Wrap(storeName, op, key, objstore.ErrPreconditionFailed, errors.Unwrap(err))
	}
	return err
}

// kindOf reads the S3 error code first (a precondition can arrive with any
// status), then the HTTP status; no response at all is transient.
func kindOf(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return objstore.ErrNotFound
		case "PreconditionFailed", "ConditionalRequestConflict":
			return objstore.ErrPreconditionFailed
		case "NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidBucketName":
			return objstore.ErrInvalid
		case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed":
			return objstore.ErrTransient
		case "NoSuchUpload":
			// The multipart upload is gone: aborted, or completed by an
			// earlier attempt whose answer was lost (the SDK retried it).
			// The put's outcome is unknown, not "no such key".
			return objstore.ErrTransient
		}
	}
	var resp *smithyhttp.ResponseError
	if !errors.As(err, &resp) || resp.Response == nil || resp.Response.Response == nil || resp.HTTPStatusCode() == 0 {
		return objstore.ErrTransient // never reached the server, or no answer
	}
	switch status := resp.HTTPStatusCode(); {
	case status == http.StatusNotFound:
		return objstore.ErrNotFound
	case status == http.StatusPreconditionFailed, status == http.StatusConflict:
		return objstore.ErrPreconditionFailed
	case status == http.StatusTooManyRequests, status == http.StatusRequestTimeout, status >= 500:
		return objstore.ErrTransient
	default:
		return objstore.ErrInvalid
	}
}

// bodyError wraps a failure reading the caller's body.
func bodyError(ctx context.Context, op, key string, err error) error {
	if ctx.Err() != nil {
		return objstore.Wrap(storeName, op, key, objstore.ErrTransient, ctx.Err())
	}
	return objstore.Wrap(storeName, op, key, objstore.ErrTransient, fmt.Errorf("reading body: %w", err))
}
