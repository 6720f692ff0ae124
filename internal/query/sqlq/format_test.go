package sqlq

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
)

// render runs q on a real DuckDB session and renders it in format.
func render(t *testing.T, q, format string, maxRows int) string {
	t.Helper()
	e := newTestLake(t).open(t, Options{})
	cols, rows, cut := queryAll(t, e, q, maxRows)
	var b bytes.Buffer
	w, err := NewResultWriter(&b, format, cols)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Row(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(cut); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestTableAlignment(t *testing.T) {
	got := render(t, `SELECT * FROM (VALUES ('checkout', 12, 1.5), ('a', NULL, -0.25), (NULL, 12345, NULL),
		('tab'||chr(9)||'new'||chr(10)||'line', 7, 1e300)) t(service, n, "ratio ü") ORDER BY n NULLS FIRST`, "table", 0)
	want := "" +
		"service             n  ratio ü\n" +
		"--------------  -----  -------\n" +
		"a                NULL    -0.25\n" +
		"tab\\tnew\\nline      7   1e+300\n" +
		"checkout           12      1.5\n" +
		"NULL            12345     NULL\n" +
		"(4 rows)\n"
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	got = render(t, "SELECT range AS i FROM range(3)", "table", 2)
	want = "i\n-\n0\n1\n(first 2 rows; more were cut by --max-rows)\n"
	if got != want {
		t.Errorf("truncated table:\n%q\nwant:\n%q", got, want)
	}
	if got = render(t, "SELECT 1 AS one WHERE false", "table", 0); got != "one\n---\n(0 rows)\n" {
		t.Errorf("empty table: %q", got)
	}
}

func TestCSVQuoting(t *testing.T) {
	got := render(t, `SELECT 'plain' AS a, 'comma,inside' AS "b,c", 'say "hi"' AS d, 'two'||chr(10)||'lines' AS e,
		NULL AS f, '' AS g, 3 AS h, [1, 2] AS l`, "csv", 0)
	want := "a,\"b,c\",d,e,f,g,h,l\n" +
		"plain,\"comma,inside\",\"say \"\"hi\"\"\",\"two\nlines\",,,3,\"[1,2]\"\n"
	if got != want {
		t.Errorf("csv:\n%q\nwant:\n%q", got, want)
	}
	// An independent RFC 4180 reader gets the values back.
	recs, err := csv.NewReader(strings.NewReader(got)).ReadAll()
	if err != nil || len(recs) != 2 || recs[1][3] != "two\nlines" || recs[1][2] != `say "hi"` {
		t.Errorf("reading back: %q %v", recs, err)
	}
}

func TestJSONTypes(t *testing.T) {
	q := `SELECT 42::BIGINT AS i, -7::TINYINT AS ti, 18446744073709551615::UBIGINT AS u, 1.5::DOUBLE AS d,
		0.1::FLOAT AS f, 'nan'::DOUBLE AS n, '-inf'::DOUBLE AS ninf, NULL AS z, true AS b,
		TIMESTAMPTZ '2024-01-02 03:04:05.123456+00' AS ts, TIMESTAMP '2024-01-02 03:04:05' AS tsl,
		DATE '2024-01-02' AS dt, TIME '10:11:12.5' AS tm, [1, 2, NULL] AS l, ['a"b'] AS ls,
		MAP {'k': 1, 'j': 2} AS m, {'x': 1, 'y': [2.5]} AS s, 'ab'::BLOB AS bl, 123.45::DECIMAL(10,2) AS dec,
		170141183460469231731687303715884105727::HUGEINT AS h, INTERVAL 90 MINUTE AS iv,
		'00000000-0000-0000-0000-0000000000ff'::UUID AS uuid, 'line'||chr(10)||'"q"' AS str`
	want := `{"i":42,"ti":-7,"u":18446744073709551615,"d":1.5,"f":0.1,"n":"NaN","ninf":"-Infinity","z":null,` +
		`"b":true,"ts":"2024-01-02T03:04:05.123456Z","tsl":"2024-01-02T03:04:05Z","dt":"2024-01-02",` +
		`"tm":"10:11:12.5","l":[1,2,null],"ls":["a\"b"],"m":{"k":1,"j":2},"s":{"x":1,"y":[2.5]},"bl":"YWI=",` +
		`"dec":123.45,"h":170141183460469231731687303715884105727,"iv":"PT1H30M",` +
		`"uuid":"00000000-0000-0000-0000-0000000000ff","str":"line\n\"q\""}`
	got := render(t, q, "jsonl", 0)
	if got != want+"\n" {
		t.Errorf("jsonl:\n%s\nwant:\n%s", got, want)
	}
	// The array form holds the same object and is valid JSON whose types an
	// independent decoder sees as numbers, strings, null, arrays, objects.
	arr := render(t, q+" UNION ALL "+q, "json", 0)
	var decoded []map[string]any
	dec := json.NewDecoder(strings.NewReader(arr))
	dec.UseNumber()
	if err := dec.Decode(&decoded); err != nil {
		t.Fatalf("json array does not parse: %v\n%s", err, arr)
	}
	if len(decoded) != 2 {
		t.Fatalf("want 2 objects, got %d", len(decoded))
	}
	o := decoded[0]
	if _, ok := o["i"].(json.Number); !ok {
		t.Errorf("int is %T", o["i"])
	}
	if _, ok := o["d"].(json.Number); !ok {
		t.Errorf("double is %T", o["d"])
	}
	if o["z"] != nil {
		t.Errorf("NULL is %v", o["z"])
	}
	if _, ok := o["l"].([]any); !ok {
		t.Errorf("list is %T", o["l"])
	}
	if _, ok := o["ts"].(string); !ok {
		t.Errorf("timestamp is %T", o["ts"])
	}
	if got := render(t, "SELECT 1 AS a WHERE false", "json", 0); got != "[]\n" {
		t.Errorf("empty json: %q", got)
	}
	if _, err := NewResultWriter(&bytes.Buffer{}, "yaml", nil); err == nil {
		t.Error("unknown format accepted")
	}
}

func TestTextRendering(t *testing.T) {
	got := render(t, `SELECT TIMESTAMPTZ '2024-01-02 03:04:05.000001+02' AS ts, [1.5, 'nan'::DOUBLE] AS l,
		'x'::BLOB AS b, INTERVAL '1 month 2 days' AS iv, 1e-7::DOUBLE AS small`, "csv", 0)
	want := "ts,l,b,iv,small\n2024-01-02T01:04:05.000001Z,\"[1.5,\"\"NaN\"\"]\",eA==,P1M2D,1e-07\n"
	if got != want {
		t.Errorf("csv text:\n%q\nwant:\n%q", got, want)
	}
}

func TestTableExplainPrintsPlan(t *testing.T) {
	got := render(t, "EXPLAIN SELECT count(*) FROM range(10)", "table", 0)
	if strings.Count(got, "\n") < 5 || strings.Contains(got, `\n`) {
		t.Errorf("plan not drawn over lines:\n%s", got)
	}
	if !strings.Contains(got, "┌") {
		t.Errorf("no drawn plan:\n%s", got)
	}
}
