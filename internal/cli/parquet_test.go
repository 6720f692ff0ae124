package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type catRow struct {
	Name   string              `parquet:"name"`
	Sketch []byte              `parquet:"sketch,optional"`
	Nested struct{ ID []byte } `parquet:"nested"`
	Parts  [][]byte            `parquet:"parts,list"`
	Attrs  map[string][]byte   `parquet:"attrs"`
	Doc    string              `parquet:"doc,json"`
}

// TestParquetCatBinaryBase64: binary columns without a string type (a
// sketch, ids) print as base64, at the top level, nested, in lists and map
// values, and decode back to their bytes; string and JSON columns stay text.
func TestParquetCatBinaryBase64(t *testing.T) {
	sketch := []byte{0xff, 0x00, 0x01, 0x80, 'a'} // not UTF-8
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[catRow](&buf)
	row := catRow{Name: "héllo", Sketch: sketch, Parts: [][]byte{{0xfe}, {0x02}},
		Attrs: map[string][]byte{"k": {0xc3}}, Doc: `{"a":1}`}
	row.Nested.ID = []byte{0x9f, 0x10}
	if _, err := w.Write([]catRow{row}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.parquet")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"parquet", "cat", path}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got struct {
		Name   string
		Sketch []byte // encoding/json decodes base64 into []byte
		Nested struct{ ID []byte }
		Parts  [][]byte
		Attrs  map[string][]byte
		Doc    json.RawMessage
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON with base64 binaries: %v\n%s", err, out.String())
	}
	if !bytes.Equal(got.Sketch, sketch) || !bytes.Equal(got.Nested.ID, row.Nested.ID) ||
		len(got.Parts) != 2 || !bytes.Equal(got.Parts[0], []byte{0xfe}) || !bytes.Equal(got.Attrs["k"], []byte{0xc3}) {
		t.Fatalf("binary columns did not round-trip through base64: %+v\n%s", got, out.String())
	}
	if got.Name != row.Name || string(got.Doc) != row.Doc {
		t.Fatalf("text columns changed: %+v", got)
	}
	if !strings.Contains(out.String(), `"sketch":"`+base64.StdEncoding.EncodeToString(sketch)+`"`) {
		t.Fatalf("sketch not printed as base64: %s", out.String())
	}
}
