package otlpreceiver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/authn"
	"github.com/sluice-dev/sluice/internal/tenant"
)

// Defaults applied by New to zero fields.
const (
	DefaultGRPCAddr              = "localhost:4317"
	DefaultHTTPAddr              = "localhost:4318"
	DefaultTenantName            = "default"
	DefaultMaxRequestBytes       = 16 << 20
	DefaultReadTimeout           = 30 * time.Second
	DefaultWriteTimeout          = 60 * time.Second
	DefaultIdleTimeout           = 2 * time.Minute
	DefaultMaxConcurrentRequests = 32
	DefaultMaxInflightBytes      = 128 << 20
	DefaultMinBodyRate           = 16 << 10
	DefaultBodyRateGrace         = 5 * time.Second
	DefaultMaxConnections        = 4096
	DefaultMaxRecordsPerRequest  = 200_000

	maxMaxRequestBytes = 1 << 30 // gRPC sizes are ints; far beyond any sane OTLP request
	maxHeaderBytes     = 64 << 10
)

// TLSConfig names PEM files. They are loaded in New, and again when they
// change on disk (authn.ServerTLS).
type TLSConfig struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, requires clients to present a certificate
	// signed by one of these CAs (mutual TLS).
	ClientCAFile string
}

// Config is the user configuration of a Receiver. Zero durations and sizes
// take the defaults above; an empty address disables that transport, so
// start from DefaultConfig to get both.
type Config struct {
	GRPCAddr string // "" disables gRPC
	HTTPAddr string // "" disables HTTP

	// TenantHeader names the header (gRPC metadata key, case-insensitive)
	// carrying the tenant; "" sends everything to DefaultTenant.
	TenantHeader  string
	DefaultTenant string // "" means "default"

	// TenantLabel, when set, maps a valid tenant to the tenant label of
	// sluice_receiver_requests_total ("" for one the consumer would
	// refuse), so that clients naming ever new tenants make no series.
	TenantLabel func(tenant string) string

	// BearerToken, when set, is required as "Authorization: Bearer <token>".
	BearerToken string

	TLS *TLSConfig // nil serves plaintext

	// MaxRequestBytes bounds a request body both on the wire and after
	// decompression.
	MaxRequestBytes int64

	// ReadTimeout bounds reading one whole request (headers and body);
	// WriteTimeout bounds the rest of the exchange (Consume and the
	// response, HTTP only); IdleTimeout closes idle keep-alive connections.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration

	// MaxConcurrentRequests bounds requests being consumed at once. A slot
	// is taken only after the body is read, so slow clients cannot hold
	// them; a request that finds none free within a moment gets 429 /
	// RESOURCE_EXHAUSTED.
	MaxConcurrentRequests int

	// MaxInflightBytes bounds the body bytes held at once, of requests
	// being read and being consumed (decompressed, plus the protobuf
	// converted from JSON). A body reserves as it grows; one that cannot
	// within a moment gets 429 / RESOURCE_EXHAUSTED. At least
	// MaxRequestBytes+1. gRPC messages are counted once received.
	MaxInflightBytes int64

	// MinBodyRate (bytes per second, on the wire) cuts an HTTP body that
	// arrives slower than this once BodyRateGrace has passed, with 408:
	// by grace+t the client must have sent MinBodyRate×t bytes. Negative
	// disables it (ReadTimeout still bounds the whole body).
	MinBodyRate   int64
	BodyRateGrace time.Duration

	// MaxConnections bounds the connections open at once per transport;
	// one more is closed as soon as it is accepted.
	MaxConnections int

	// MaxRecordsPerRequest bounds the log records, data points or spans
	// of one request, and (separately) the resources, scopes and metrics
	// holding them, counted before anything decodes it: each decodes into
	// a few hundred bytes whatever its size on the wire, so without it
	// 16 MiB of empty records would take gigabytes.
	// Past it the request gets 400 / InvalidArgument. Negative disables it.
	MaxRecordsPerRequest int
}

// DefaultConfig has both transports on their OTLP ports on localhost.
func DefaultConfig() Config {
	return Config{GRPCAddr: DefaultGRPCAddr, HTTPAddr: DefaultHTTPAddr}
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.DefaultTenant == "" {
		c.DefaultTenant = DefaultTenantName
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxConcurrentRequests == 0 {
		c.MaxConcurrentRequests = DefaultMaxConcurrentRequests
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = max(DefaultMaxInflightBytes, 2*c.MaxRequestBytes)
	}
	if c.MinBodyRate == 0 {
		c.MinBodyRate = DefaultMinBodyRate
	}
	if c.BodyRateGrace == 0 {
		c.BodyRateGrace = DefaultBodyRateGrace
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxRecordsPerRequest == 0 {
		c.MaxRecordsPerRequest = DefaultMaxRecordsPerRequest
	}
	return c
}

// Validate reports the first problem of a config after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.GRPCAddr == "" && c.HTTPAddr == "" {
		return errors.New("otlp receiver: both grpc and http are disabled")
	}
	if c.TenantHeader != "" && !isToken(c.TenantHeader) {
		return fmt.Errorf("otlp receiver: tenant header %q is not a valid header name", c.TenantHeader)
	}
	if !tenant.Valid(c.DefaultTenant) {
		return fmt.Errorf("otlp receiver: default tenant %q must match [A-Za-z0-9._-]{1,%d}", c.DefaultTenant, tenant.MaxLen)
	}
	if strings.ContainsAny(c.BearerToken, " \t\r\n") {
		return errors.New("otlp receiver: bearer token must not contain whitespace")
	}
	if c.MaxRequestBytes < 0 || c.MaxRequestBytes > maxMaxRequestBytes {
		return fmt.Errorf("otlp receiver: max request bytes %d out of range (0, %d]", c.MaxRequestBytes, maxMaxRequestBytes)
	}
	if c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 {
		return errors.New("otlp receiver: timeouts must not be negative")
	}
	if c.MaxConcurrentRequests < 0 {
		return fmt.Errorf("otlp receiver: max concurrent requests %d is negative", c.MaxConcurrentRequests)
	}
	if c.MaxInflightBytes <= c.MaxRequestBytes {
		return fmt.Errorf("otlp receiver: max in-flight bytes %d must be more than max request bytes %d", c.MaxInflightBytes, c.MaxRequestBytes)
	}
	if c.MaxConnections < 0 {
		return fmt.Errorf("otlp receiver: max connections %d is negative", c.MaxConnections)
	}
	if c.BodyRateGrace < 0 {
		return errors.New("otlp receiver: body rate grace must not be negative")
	}
	if c.TLS != nil && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		return errors.New("otlp receiver: tls needs both cert file and key file")
	}
	return nil
}

// load builds the server TLS config (authn.ServerTLS): the files are
// read now, so that a bad path fails at start-up rather than at the first
// handshake, and again when they change on disk.
func (t *TLSConfig) load() (*tls.Config, error) {
	return authn.ServerTLS(authn.TLSFiles{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: t.ClientCAFile})
}

// isToken reports whether s is a valid HTTP header name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return textproto.CanonicalMIMEHeaderKey(s) != ""
}
