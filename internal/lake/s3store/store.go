package s3store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/lake"
)

// Config configures a Store. Zero values take the defaults.
type Config struct {
	Bucket string // required
	Prefix string // key prefix of the lake inside the bucket; slashes around it are ignored
	Region string // default: from the AWS environment, else us-east-1
	// Endpoint is the base URL of an S3-compatible server, e.g.
	// http://127.0.0.1:7070; empty means AWS S3 (or AWS_ENDPOINT_URL).
	Endpoint string
	// Static credentials; when AccessKeyID is empty the standard AWS chain
	// (environment, shared files, instance role) is used.
	AccessKeyID, SecretAccessKey, SessionToken string
	ForcePathStyle                             bool // bucket in the path, not the host name (most S3-compatible servers)

	PartSize          int64         // multipart part size and single-PUT limit; default 16 MiB, at least 5 MiB
	UploadConcurrency int           // parts of one object uploaded at once; default 2
	ReadBlockSize     int64         // granularity of reads and read-ahead; default 1 MiB
	ReadCacheBlocks   int           // blocks cached per open object; default 16
	MaxRetries        int           // attempts per S3 call (the SDK's standard retryer); default 5
	RequestTimeout    time.Duration // bound on one S3 call including retries; default 5m

	Logger *slog.Logger // nil: slog.Default()
	// Registerer gets the retry counters (sluice_lake_s3_retries_total,
	// sluice_lake_s3_retries_exhausted_total); nil registers nothing.
	Registerer prometheus.Registerer
}

// Defaults and limits of Config.
const (
	DefaultPartSize          = 16 << 20
	MinPartSize              = 5 << 20 // S3's minimum for all parts but the last
	MaxPartSize              = 5 << 30
	DefaultUploadConcurrency = 2
	DefaultReadBlockSize     = 1 << 20
	DefaultReadCacheBlocks   = 16
	DefaultMaxRetries        = 5
	DefaultRequestTimeout    = 5 * time.Minute
)

// Store is a lake.Store over one bucket and prefix.
type Store struct {
	cfg    Config
	client *s3.Client
	bucket string
	prefix string // "" or ending in "/"
	log    *slog.Logger

	// unconditional is set once the server refused If-None-Match; see
	// invariant 2 in the package doc.
	unconditional atomic.Bool
}

var _ lake.Store = (*Store)(nil)

// New returns a Store for cfg. It checks cfg and loads credentials but
// makes no request; ctx bounds the credential lookup only.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3store: Config.Bucket is required")
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartSize < MinPartSize || cfg.PartSize > MaxPartSize {
		return nil, fmt.Errorf("s3store: part size %d out of range [5MiB, 5GiB]", cfg.PartSize)
	}
	if cfg.UploadConcurrency <= 0 {
		cfg.UploadConcurrency = DefaultUploadConcurrency
	}
	if cfg.ReadBlockSize <= 0 {
		cfg.ReadBlockSize = DefaultReadBlockSize
	}
	if cfg.ReadCacheBlocks <= 0 {
		cfg.ReadCacheBlocks = DefaultReadCacheBlocks
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var loadOpts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		loadOpts = append(loadOpts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		loadOpts = append(loadOpts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS config: %w", err)
	}
	log := cfg.Logger.With("component", "s3")
	awsCfg.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		lvl := slog.LevelDebug
		if c == logging.Warn {
			lvl = slog.LevelWarn
		}
		log.Log(context.Background(), lvl, fmt.Sprintf(format, v...))
	})
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1" // S3-compatible servers rarely care
	}
	maxAttempts := cfg.MaxRetries
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, m.countRetries)
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.ForcePathStyle
		// Ranged GETs carry no whole-object checksum to validate; saying so
		// on every read is noise.
		o.DisableLogOutputChecksumValidationSkipped = true
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = maxAttempts
			// The lake loop backs off on its own; a client-side retry
			// quota would only turn a slow server into hard errors.
			so.RateLimiter = ratelimit.None
		})
	})
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &Store{cfg: cfg, client: client, bucket: cfg.Bucket, prefix: prefix, log: cfg.Logger}, nil
}

// String names the store as s3://bucket/prefix.
func (s *Store) String() string { return "s3://" + s.bucket + "/" + s.prefix }

// Client returns the underlying S3 client (tests and tools).
func (s *Store) Client() *s3.Client { return s.client }

// Key returns the bucket key of the lake path p.
func (s *Store) Key(p string) string { return s.prefix + p }

func (s *Store) key(p string) (string, error) {
	if p == "" || path.IsAbs(p) || strings.Contains(p, "\\") {
		return "", fmt.Errorf("s3store: bad object path %q", p)
	}
	if c := path.Clean(p); c != p || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("s3store: bad object path %q", p)
	}
	return s.prefix + p, nil
}

func (s *Store) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
}

// Create implements lake.Store.
func (s *Store) Create(p string) (lake.ObjectWriter, error) {
	key, err := s.key(p)
	if err != nil {
		return nil, err
	}
	return newWriter(s, key), nil
}

// Open implements lake.Store. It asks for the object's size and ETag;
// reads are ranged GETs through a small block cache.
func (s *Store) Open(p string) (lake.ObjectReader, error) {
	key, err := s.key(p)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.callCtx()
	defer cancel()
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return nil, wrap("head", key, err)
	}
	return newReader(s, key, aws.ToInt64(out.ContentLength), aws.ToString(out.ETag)), nil
}

// Remove implements lake.Store.
func (s *Store) Remove(p string) error {
	key, err := s.key(p)
	if err != nil {
		return err
	}
	ctx, cancel := s.callCtx()
	defer cancel()
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil && !isNotFound(err) { // S3 answers 204 either way; some servers 404
		return wrap("delete", key, err)
	}
	return nil
}

// Rename implements lake.Renamer: a server-side CopyObject, then a delete
// of src. A missing src fails with ErrNotFound. Between the two calls both
// keys exist (docs/s3.md). CopyObject copies up to 5 GiB in one call, far
// above the lake's file sizes.
func (s *Store) Rename(src, dst string) error {
	from, err := s.key(src)
	if err != nil {
		return err
	}
	to, err := s.key(dst)
	if err != nil {
		return err
	}
	ctx, cancel := s.callCtx()
	defer cancel()
	source := url.PathEscape(s.bucket + "/" + from)
	source = strings.ReplaceAll(source, "%2F", "/")
	if _, err := s.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: &to, CopySource: &source}); err != nil {
		return wrap("copy to "+to, from, err)
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &from})
	if err != nil && !isNotFound(err) {
		return wrap("delete", from, err)
	}
	return nil
}

var _ lake.Renamer = (*Store)(nil)

// Walk implements lake.Store with ListObjectsV2, whose keys come in
// lexical (UTF-8 binary) order. Keys ending in "/" (folder markers of
// some tools) are not objects of the lake and are skipped.
func (s *Store) Walk(prefix string, fn func(p string, size int64) error) error {
	full := s.prefix + prefix
	pg := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &full})
	for pg.HasMorePages() {
		ctx, cancel := s.callCtx()
		page, err := pg.NextPage(ctx)
		cancel()
		if err != nil {
			return wrap("list", full, err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			p, ok := strings.CutPrefix(k, s.prefix)
			if !ok || p == "" || strings.HasSuffix(p, "/") {
				continue
			}
			if err := fn(p, aws.ToInt64(o.Size)); err != nil {
				return fmt.Errorf("walk %q in %s: %w", prefix, s, err)
			}
		}
	}
	return nil
}
