package format

import (
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/sluice-dev/sluice/internal/signal"
)

// TestKindLayout: Layout is the shape parquet-go gives Node, for every
// kind, so readers that check a file against Layout accept what writers
// build from Node.
func TestKindLayout(t *testing.T) {
	g := parquet.Group{}
	for k := range numKinds {
		g[string(rune('a'+k))] = k.Node()
	}
	schema := parquet.NewSchema("t", g)
	for k := range numKinds {
		c := Column{string(rune('a' + k)), k}
		leaf, ok := schema.Lookup(c.LeafPath()...)
		if !ok {
			t.Fatalf("kind %d: no leaf at %v", k, c.LeafPath())
		}
		kind, rep, def := k.Layout()
		if leaf.Node.Type().Kind() != kind || leaf.MaxRepetitionLevel != rep || leaf.MaxDefinitionLevel != def {
			t.Errorf("kind %d: leaf %v rep %d def %d; Layout says %v %d %d", k, leaf.Node.Type().Kind(),
				leaf.MaxRepetitionLevel, leaf.MaxDefinitionLevel, kind, rep, def)
		}
	}
	for vt := range NumValueTypes {
		n := AttrNode(signal.ValueType(vt))
		if !n.Optional() || n.Type().Kind() != AttrKind(signal.ValueType(vt)) {
			t.Errorf("value type %d: node %v, AttrKind %v", vt, n, AttrKind(signal.ValueType(vt)))
		}
	}
}

// TestTables: every table is found by name, has unique column names that
// are neither attribute nor overflow names, a time column and a sort key
// made of its columns.
func TestTables(t *testing.T) {
	for _, tb := range Tables {
		if Lookup(tb.Name) != tb {
			t.Errorf("Lookup(%q) is not the table", tb.Name)
		}
		seen := map[string]bool{}
		for i, c := range tb.Columns {
			if seen[c.Name] {
				t.Errorf("%s: column %q twice", tb.Name, c.Name)
			}
			seen[c.Name] = true
			if IsAttrColumn(c.Name) || IsOverflowColumn(c.Name) {
				t.Errorf("%s: fixed column %q parses as an attribute or overflow column", tb.Name, c.Name)
			}
			if tb.Column(c.Name) != i {
				t.Errorf("%s: Column(%q) = %d, want %d", tb.Name, c.Name, tb.Column(c.Name), i)
			}
		}
		if !seen[tb.TimeColumn] || TimeColumn(tb.Name) != tb.TimeColumn {
			t.Errorf("%s: time column %q is not a column", tb.Name, tb.TimeColumn)
		}
		if SortKey(tb.Name) != tb.Sort || tb.Sort == "" {
			t.Errorf("%s: sort key %q", tb.Name, tb.Sort)
		}
	}
	if Lookup("nope") != nil || TimeColumn("nope") != ColTimestamp || SortKey("nope") != "" {
		t.Error("unknown table")
	}
	if tb := Lookup(TableLogs); tb.Column("nope") != -1 {
		t.Error("unknown column found")
	}
}
