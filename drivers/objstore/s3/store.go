package s3

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/engenho/engenho/drivers/objstore"
)

const storeName = "s3"

// abortTimeout bounds the clean-up of a failed multipart upload, which runs
// even when the caller's context is already cancelled.
const abortTimeout = 30 * time.Second

// Store is a bucket on an S3 API server. Safe for concurrent use.
type Store struct {
	cfg       Config
	client    *s3.Client
	transport *http.Transport
}

var (
	_ objstore.Store       = (*Store)(nil)
	_ objstore.RangeReader = (*Store)(nil)
)

// New builds a store from cfg. It makes no request.
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, objstore.Wrap(storeName, "open", "", objstore.ErrInvalid, err)
	}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = cfg.MaxAttempts })
		}),
		// We hash what matters ourselves (checkpoints carry a sha256);
		// optional CRCs only cost CPU and trip some servers.
		awsconfig.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		awsconfig.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(
			cfg.AccessKey, cfg.SecretKey.Reveal(), cfg.SessionToken.Reveal())))
	}
	if cfg.Logger != nil {
		opts = append(opts, awsconfig.WithLogger(sdkLogger(cfg.Logger)), awsconfig.WithClientLogMode(aws.LogRetries))
	} else {
		opts = append(opts, awsconfig.WithLogger(logging.Nop{}))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, objstore.Wrap(storeName, "open", "", objstore.ErrInvalid, fmt.Errorf("loading AWS config: %w", err))
	}
	transport := ownTransport(awsCfg.HTTPClient)
	withIOTimeout(transport, cfg.IOTimeout)
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.HTTPClient = &http.Client{Transport: transport, CheckRedirect: noRedirects}
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &Store{cfg: cfg, client: client, transport: transport}, nil
}

// ownTransport copies the transport the AWS config built (with any custom
// CA bundle from the environment), so that Close can drop its idle
// connections.
func ownTransport(c aws.HTTPClient) *http.Transport {
	if b, ok := c.(*awshttp.BuildableClient); ok {
		return b.GetTransport()
	}
	return awshttp.NewBuildableClient().GetTransport()
}

// noRedirects makes a redirect (a wrong region, say) an error rather than
// a request elsewhere.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Close drops idle connections. The store stays usable (a later call
// dials again).
func (s *Store) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// Client is the underlying SDK client (benchmarks compare against it).
func (s *Store) Client() *s3.Client { return s.client }

// Bucket is the bucket's name.
func (s *Store) Bucket() string { return s.cfg.Bucket }

// EnsureBucket creates the bucket if it does not exist (tests and first
// setup; a production bucket is normally made by the operator).
func (s *Store) EnsureBucket(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.cfg.Bucket})
	if err == nil {
		return nil
	}
	_, err = s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.cfg.Bucket})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return classify(ctx, "create-bucket", s.cfg.Bucket, err)
	}
	return nil
}

// Get opens key's object. Reading its body fails with ErrTransient when
// the connection breaks or stalls past IOTimeout, or the body ends short of
// its Content-Length (DRV-18).
func (s *Store) Get(ctx context.Context, key string) (*objstore.Object, error) {
	if err := objstore.ValidKey(key); err != nil {
		return nil, objstore.Wrap(storeName, "get", key, objstore.ErrInvalid, err)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &key})
	if err != nil {
		return nil, classify(ctx, "get", key, err)
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	return &objstore.Object{
		Body: &checkedBody{rc: out.Body, key: key, size: size},
		Info: objstore.Info{
			Key: key, ETag: aws.ToString(out.ETag), Size: aws.ToInt64(out.ContentLength),
			Modified: aws.ToTime(out.LastModified),
		},
	}, nil
}

// GetRange opens at most n bytes of key's object from off with an HTTP
// Range request. The whole object's size comes from the Content-Range
// answer; a range past the end (416) and n = 0 are answered from a
// HeadObject with an empty body. Reading fails as Get's body does.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (*objstore.Object, error) {
	if err := objstore.ValidKey(key); err != nil {
		return nil, objstore.Wrap(storeName, "get", key, objstore.ErrInvalid, err)
	}
	if err := objstore.CheckRange(off, n); err != nil {
		return nil, objstore.Wrap(storeName, "get", key, objstore.ErrInvalid, err)
	}
	if n == 0 {
		return s.emptyRange(ctx, key, off, nil)
	}
	rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &key, Range: &rng})
	if err != nil {
		err = classify(ctx, "get", key, err)
		if unsatisfiable(err) {
			return s.emptyRange(ctx, key, off, err)
		}
		return nil, err
	}
	info := objstore.Info{Key: key, ETag: aws.ToString(out.ETag), Modified: aws.ToTime(out.LastModified)}
	length := aws.ToInt64(out.ContentLength)
	body := &checkedBody{rc: out.Body, key: key, size: length}
	if out.ContentRange == nil {
		// The server ignored the range and sent the whole object.
		info.Size = length
		if _, err := io.CopyN(io.Discard, body, min(off, length)); err != nil {
			body.Close()
			return nil, err
		}
		return &objstore.Object{Body: limitedBody{io.LimitReader(body, objstore.RangeLen(length, off, n)), body}, Info: info}, nil
	}
	total, err := rangeTotal(aws.ToString(out.ContentRange))
	if err != nil {
		body.Close()
		return nil, objstore.Wrap(storeName, "get", key, objstore.ErrInvalid, err)
	}
	info.Size = total
	return &objstore.Object{Body: body, Info: info}, nil
}

// emptyRange answers a range that holds no bytes: the object's info from
// a HeadObject, and an empty body. cause is the 416 that led here, if any.
func (s *Store) emptyRange(ctx context.Context, key string, off int64, cause error) (*objstore.Object, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &key})
	if err != nil {
		return nil, classify(ctx, "get", key, err)
	}
	size := aws.ToInt64(out.ContentLength)
	if cause != nil && off < size {
		// A 416 for a range that does hold bytes is not ours to hide.
		return nil, cause
	}
	return &objstore.Object{
		Body: io.NopCloser(strings.NewReader("")),
		Info: objstore.Info{Key: key, ETag: aws.ToString(out.ETag), Size: size, Modified: aws.ToTime(out.LastModified)},
	}, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}

// unsatisfiable reports a 416 Range Not Satisfiable answer.
func unsatisfiable(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "InvalidRange" {
		return true
	}
	var resp *smithyhttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable
}

// rangeTotal reads the object's full size from a Content-Range header
// ("bytes FIRST-LAST/TOTAL").
func rangeTotal(header string) (int64, error) {
	_, total, ok := strings.Cut(header, "/")
	size, err := strconv.ParseInt(total, 10, 64)
	if !ok || err != nil || size < 0 {
		return 0, fmt.Errorf("Content-Range %q has no object size", header)
	}
	return size, nil
}

// Put stores body under key when cond holds: one PutObject up to PartSize,
// a multipart upload beyond.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, cond objstore.Cond) (string, error) {
	if err := objstore.ValidKey(key); err != nil {
		return "", objstore.Wrap(storeName, "put", key, objstore.ErrInvalid, err)
	}
	if err := cond.Check(); err != nil {
		return "", objstore.Wrap(storeName, "put", key, objstore.ErrInvalid, err)
	}
	br := bufio.NewReaderSize(body, 64<<10)
	first, more, err := readPart(br, nil, s.cfg.PartSize)
	if err != nil {
		return "", bodyError(ctx, "put", key, err)
	}
	if !more {
		return s.putSingle(ctx, key, first, cond)
	}
	return s.putMultipart(ctx, key, br, first, cond)
}

// readPart reads up to size bytes into buf (grown on the first big read)
// and reports whether the body goes on beyond them.
func readPart(br *bufio.Reader, buf []byte, size int64) ([]byte, bool, error) {
	if buf == nil {
		// Most objects are small (a lease, a manifest): start small.
		small := make([]byte, min(size, 64<<10))
		n, err := io.ReadFull(br, small)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return small[:n], false, nil
		}
		if err != nil {
			return nil, false, err
		}
		buf = make([]byte, size)
		copy(buf, small)
		m, err := io.ReadFull(br, buf[n:])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return buf[:n+m], false, nil
		}
		if err != nil {
			return nil, false, err
		}
	} else {
		n, err := io.ReadFull(br, buf[:size])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return buf[:n], false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	_, err := br.Peek(1)
	if err == io.EOF {
		return buf[:size], false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return buf[:size], true, nil
}

func (s *Store) putSingle(ctx context.Context, key string, data []byte, cond objstore.Cond) (string, error) {
	in := &s3.PutObjectInput{
		Bucket: &s.cfg.Bucket, Key: &key,
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	}
	in.IfNoneMatch, in.IfMatch = condHeaders(cond)
	out, err := s.client.PutObject(ctx, in)
	if err != nil {
		return "", classifyCond(ctx, "put", key, cond, err)
	}
	return aws.ToString(out.ETag), nil
}

func condHeaders(cond objstore.Cond) (ifNoneMatch, ifMatch *string) {
	if cond.IfNoneMatch {
		ifNoneMatch = aws.String("*")
	}
	if cond.IfMatch != "" {
		ifMatch = aws.String(cond.IfMatch)
	}
	return ifNoneMatch, ifMatch
}

// putMultipart uploads first and the rest of br part by part, then
// completes the upload under cond. Any failure aborts the upload, so the
// previous object stays.
func (s *Store) putMultipart(ctx context.Context, key string, br *bufio.Reader, first []byte, cond objstore.Cond) (string, error) {
	// Fail early, before uploading, when the condition already does not
	// hold; the condition on Complete is what makes it atomic.
	if err := s.precheck(ctx, key, cond); err != nil {
		return "", err
	}
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: &key})
	if err != nil {
		return "", classify(ctx, "put", key, err)
	}
	etag, err := s.uploadParts(ctx, key, created.UploadId, br, first, cond)
	if err != nil {
		s.abort(ctx, key, created.UploadId)
		return "", err
	}
	return etag, nil
}

func (s *Store) uploadParts(ctx context.Context, key string, uploadID *string, br *bufio.Reader, part []byte, cond objstore.Cond) (string, error) {
	var parts []types.CompletedPart
	more := true // putMultipart is only called when the body goes on
	for n := int32(1); ; n++ {
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &s.cfg.Bucket, Key: &key, UploadId: uploadID, PartNumber: aws.Int32(n),
			Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part))),
		})
		if err != nil {
			return "", classify(ctx, "put", key, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
		if !more {
			break
		}
		// The SDK is done with the buffer once UploadPart returns.
		if part, more, err = readPart(br, part[:cap(part)], s.cfg.PartSize); err != nil {
			return "", bodyError(ctx, "put", key, err)
		}
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket: &s.cfg.Bucket, Key: &key, UploadId: uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	in.IfNoneMatch, in.IfMatch = condHeaders(cond)
	out, err := s.client.CompleteMultipartUpload(ctx, in)
	if err != nil {
		return "", classifyCond(ctx, "put", key, cond, err)
	}
	return aws.ToString(out.ETag), nil
}

// precheck fails a conditional multipart put early when its condition
// already does not hold.
func (s *Store) precheck(ctx context.Context, key string, cond objstore.Cond) error {
	if cond == objstore.Always {
		return nil
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &key})
	exists, etag := err == nil, ""
	if err != nil {
		if cerr := classify(ctx, "put", key, err); !errors.Is(cerr, objstore.ErrNotFound) {
			return cerr
		}
	} else {
		etag = aws.ToString(out.ETag)
	}
	if !cond.Holds(exists, etag) {
		return objstore.Errorf(storeName, "put", key, objstore.ErrPreconditionFailed, "condition does not hold")
	}
	return nil
}

// abort cancels a multipart upload, even when ctx is already done.
func (s *Store) abort(ctx context.Context, key string, uploadID *string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	_, _ = s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: &key, UploadId: uploadID})
}

// Delete removes key; with cond.IfMatch the server is asked to check the
// ETag, which MinIO and gofakes3 ignore (see objstore.Store).
func (s *Store) Delete(ctx context.Context, key string, cond objstore.Cond) error {
	if err := objstore.ValidKey(key); err != nil {
		return objstore.Wrap(storeName, "delete", key, objstore.ErrInvalid, err)
	}
	if cond.IfNoneMatch {
		return objstore.Errorf(storeName, "delete", key, objstore.ErrInvalid, "If-None-Match makes no sense on delete")
	}
	in := &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: &key}
	if cond.IfMatch != "" {
		in.IfMatch = aws.String(cond.IfMatch)
	}
	_, err := s.client.DeleteObject(ctx, in)
	if err == nil {
		return nil
	}
	err = classifyCond(ctx, "delete", key, cond, err)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil
	}
	return err
}

// List returns the objects whose key starts with prefix, sorted by key (S3
// lists in key order).
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	if err := objstore.ValidPrefix(prefix); err != nil {
		return nil, objstore.Wrap(storeName, "list", prefix, objstore.ErrInvalid, err)
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, MaxKeys: aws.Int32(s.cfg.PageSize)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	var out []objstore.Info
	pages := s3.NewListObjectsV2Paginator(s.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, classify(ctx, "list", prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, objstore.Info{
				Key: aws.ToString(o.Key), ETag: aws.ToString(o.ETag),
				Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified),
			})
		}
	}
	return out, nil
}
