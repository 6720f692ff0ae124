package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/sluice-dev/sluice/internal/corpustest"
)

// EnvDSN names a PostgreSQL server to use instead of starting one. Tests
// create and drop schemas in its database, so its user needs CREATE there.
const EnvDSN = "SLUICE_POSTGRES_DSN"

// EnvBin names a directory holding initdb and postgres, searched first.
const EnvBin = "SLUICE_POSTGRES_BIN"

const missing = "PostgreSQL server binaries (apt-get install postgresql)"

// ErrNotInstalled means no initdb/postgres pair was found.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL server binaries (initdb, postgres) not found")

// startTimeout bounds initdb plus server start-up; both take about a
// second on an idle machine.
const startTimeout = 60 * time.Second

// Server is a throwaway PostgreSQL server in a temporary directory.
type Server struct {
	dsn    string
	dir    string
	bin    string // for Restart
	data   string
	owner  *account
	port   int
	cmd    *exec.Cmd
	exited chan struct{} // closed when the server process is reaped
	log    *lockedBuffer
	stop   sync.Once
}

// DSN connects as the superuser "sluice" to the database "postgres".
func (s *Server) DSN() string { return s.dsn }

// Launch initialises a cluster in a new temporary directory and starts a
// server on a free loopback port. The caller must Stop it.
func Launch() (*Server, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	owner, err := serverUser()
	if err != nil {
		return nil, err
	}
	if owner != nil {
		if err := os.Chown(dir, int(owner.uid), int(owner.gid)); err != nil {
			return nil, fmt.Errorf("pgtest: chown %s to the server user: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "sluice", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir // the caller's directory may be closed to the server user
	if initdb.SysProcAttr, err = sysProcAttr(owner); err != nil {
		return nil, err
	}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: %s: %w\n%s", initdb, err, out)
	}
	// The port is free when picked but could be taken before postgres
	// binds it; a few attempts make that race harmless.
	for attempt := 1; ; attempt++ {
		s, err := startServer(bin, dir, data, owner)
		if err == nil {
			ok = true
			return s, nil
		}
		if attempt == 3 {
			return nil, err
		}
	}
}

func startServer(bin, dir, data string, owner *account) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		dsn: fmt.Sprintf("postgres://sluice@127.0.0.1:%d/postgres?sslmode=disable", port),
		dir: dir, bin: bin, data: data, owner: owner, port: port,
		log: &lockedBuffer{},
	}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Restart stops the server as an operator's restart does (fast shutdown:
// clients are disconnected), keeps it down for down, and starts it again
// on the same port and data, so that clients holding the DSN reconnect.
// Not for a server of $SLUICE_POSTGRES_DSN, nor concurrent with Stop.
func (s *Server) Restart(down time.Duration) error {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.kill()
	}
	time.Sleep(down)
	return s.start()
}

// start runs postgres on s.port and waits until it answers.
func (s *Server) start() error {
	var err error
	s.exited = make(chan struct{})
	// fsync and friends off: a test server's data may be lost on a crash.
	s.cmd = exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data, "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(s.port),
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "log_min_messages=warning")
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if s.cmd.SysProcAttr, err = sysProcAttr(s.owner); err != nil {
		return err
	}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start %s: %w", s.cmd, err)
	}
	cmd, exited := s.cmd, s.exited
	go func() {
		cmd.Wait() //nolint:errcheck // reported through s.log
		close(exited)
	}()
	if err := s.waitReady(); err != nil {
		s.kill()
		return err
	}
	return nil
}

// waitReady polls until the server accepts a query.
func (s *Server) waitReady() error {
	db, err := sql.Open("pgx", s.dsn)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer db.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("pgtest: postgres exited during start-up:\n%s", s.log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not ready after %s: %w\n%s", startTimeout, err, s.log)
		}
	}
}

// Stop shuts the server down (fast shutdown: clients are disconnected) and
// removes its directory. It is idempotent.
func (s *Server) Stop() error {
	var err error
	s.stop.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			err = fmt.Errorf("pgtest: postgres did not stop within 15s; killed:\n%s", s.log)
			s.kill()
		}
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	})
	return err
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// FindBinaries returns a directory holding initdb and postgres: $EnvBin,
// then the newest /usr/lib/postgresql/<version>/bin (Debian, Ubuntu), then
// wherever initdb is on $PATH.
func FindBinaries() (string, error) {
	var dirs []string
	if d := os.Getenv(EnvBin); d != "" {
		dirs = append(dirs, d)
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(debian, func(a, b string) int { return versionOf(b) - versionOf(a) })
	dirs = append(dirs, debian...)
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if executable(filepath.Join(d, "initdb")) && executable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

// versionOf reads the major version from .../postgresql/<version>/bin.
func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// account is the unprivileged user the server runs as when we are root.
type account struct{ uid, gid uint32 }

// serverUser returns nil when not root: the server runs as we do.
func serverUser() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			return &account{uint32(uid), uint32(gid)}, nil
		}
	}
	return nil, errors.New("pgtest: running as root, and neither user postgres nor nobody exists to run the server as")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// DSN returns $SLUICE_POSTGRES_DSN, or the DSN of the package's shared
// server, started on first use; Main stops it. Without binaries the test
// is skipped (or fails under SLUICE_REQUIRE_ALL).
func DSN(tb testing.TB) string {
	tb.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	shared.once.Do(func() { shared.srv, shared.err = Launch() })
	return check(tb, shared.srv, shared.err)
}

// Main runs the tests and then stops the shared server, if one started.
// Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}

// Start returns $SLUICE_POSTGRES_DSN, or starts a server of the test's own,
// stopped at tb.Cleanup.
func Start(tb testing.TB) string {
	tb.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	srv, err := Launch()
	if err == nil {
		tb.Cleanup(func() {
			if err := srv.Stop(); err != nil {
				tb.Error(err)
			}
		})
	}
	return check(tb, srv, err)
}

func check(tb testing.TB, srv *Server, err error) string {
	tb.Helper()
	if errors.Is(err, ErrNotInstalled) {
		corpustest.Missing(tb, missing)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return srv.DSN()
}

// Schema creates a new, empty schema in dsn's database and returns dsn with
// search_path set to it, so unqualified tables land there. The schema is
// dropped at tb.Cleanup.
func Schema(tb testing.TB, dsn string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("pgtest: parse DSN: %v", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := "sluice_test_" + hex.EncodeToString(rnd[:])
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA `+name); err != nil {
		tb.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	tb.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			tb.Error(err)
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, `DROP SCHEMA `+name+` CASCADE`); err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}
