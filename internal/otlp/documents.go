package otlp

// EachJSONDocument calls fn for every top-level object in js: one request,
// JSON lines as the Collector's file exporter writes them, or objects one
// after another. An error names the document by its number from 1.
func EachJSONDocument(js []byte, fn func(doc []byte) error) error {
	return eachJSONDoc(js, fn)
}
