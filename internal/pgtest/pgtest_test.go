package pgtest

import (
	"context"
	"database/sql"
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestServer checks the server this package provides: it answers, and a
// schema DSN puts unqualified tables in that schema.
func TestServer(t *testing.T) {
	dsn := Schema(t, DSN(t))
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE probe (x BIGINT)`); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT table_schema FROM information_schema.tables WHERE table_name = 'probe'`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	var current string
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&current); err != nil || current != schema {
		t.Fatalf("table in %q, current schema %q, %v", schema, current, err)
	}
}

// TestStartOwn starts a second, private server and stops it.
func TestStartOwn(t *testing.T) {
	if os.Getenv(EnvDSN) != "" {
		t.Skip("an external server is configured")
	}
	dsn := Start(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var one int
	if err := db.QueryRow(`SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d, %v", one, err)
	}
}
