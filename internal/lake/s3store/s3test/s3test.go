package s3test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/corpustest"
	"github.com/sluice-dev/sluice/internal/lake/s3store"
)

// Credentials of the test server's root account.
const (
	AccessKey = "sluice-test-access"
	SecretKey = "sluice-test-secret-0123456789"
)

// Server is a running versitygw; it stops when its test ends.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Dir      string // the POSIX directory it serves: one folder per bucket
}

// Binary returns the server binary, or calls corpustest.Missing.
func Binary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("SLUICE_S3_SERVER"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		corpustest.Missing(tb, "the S3 test server $SLUICE_S3_SERVER="+p)
	}
	if root, err := corpustest.ModuleRoot(); err == nil {
		p := filepath.Join(root, ".tools", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	corpustest.Missing(tb, "the S3 test server versitygw (.tools/bin/versitygw or $SLUICE_S3_SERVER; scripts/test.sh installs it)")
	return ""
}

// Start starts a server on a free loopback port serving a fresh temporary
// directory, and waits until it answers.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := Binary(tb)
	dir := tb.TempDir()
	var lastErr error
	for range 3 { // the free port may be taken between probe and bind
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		var logs bytes.Buffer
		cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr, "posix", dir)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		s := &Server{Endpoint: "http://" + addr, Dir: dir}
		if lastErr = s.wait(exited); lastErr == nil {
			tb.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
				if tb.Failed() {
					tb.Logf("versitygw output:\n%s", logs.String())
				}
			})
			return s
		}
		_ = cmd.Process.Kill()
		<-exited
		lastErr = fmt.Errorf("%w\n%s", lastErr, logs.String())
	}
	tb.Fatalf("S3 test server did not start: %v", lastErr)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) wait(exited <-chan struct{}) error {
	st, err := s3store.New(context.Background(), s.Config("probe"))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = st.Client().ListBuckets(ctx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer after 20s: %w", err)
		}
	}
}

// Config returns a store config for bucket on this server.
func (s *Server) Config(bucket string) s3store.Config {
	return s3store.Config{
		Bucket: bucket, Region: "us-east-1", Endpoint: s.Endpoint,
		AccessKeyID: AccessKey, SecretAccessKey: SecretKey, ForcePathStyle: true,
		MaxRetries: 2, RequestTimeout: time.Minute,
	}
}

var buckets atomic.Int64

// Bucket creates a new empty bucket and returns its name.
func (s *Server) Bucket(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("sluice-%s-%d", strings.ToLower(sanitize(tb.Name())), buckets.Add(1))
	if len(name) > 63 {
		name = fmt.Sprintf("sluice-t-%d-%d", time.Now().UnixNano()%1e9, buckets.Add(1))
	}
	st, err := s3store.New(context.Background(), s.Config(name))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		tb.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}
