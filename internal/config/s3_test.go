package config

import (
	"strings"
	"testing"
)

func TestS3Config(t *testing.T) {
	src := `
lake:
  s3:
    bucket: lake-bucket
    prefix: prod/lake
    endpoint: http://127.0.0.1:7070
    access_key_id: ${KEY}
    secret_access_key: ${SECRET}
    force_path_style: true
    part_size: 32MiB
`
	c, err := Parse([]byte(src), env(map[string]string{"KEY": "AKIA", "SECRET": "s3cr3t"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := c.Lake.S3
	if !s.Enabled() || s.Bucket != "lake-bucket" || s.AccessKeyID != "AKIA" || s.SecretAccessKey != "s3cr3t" || !s.ForcePathStyle || s.PartSize != 32<<20 || s.MaxRetries != 5 {
		t.Errorf("parsed %+v", s)
	}
	if r := c.Redacted(); strings.Contains(r.YAML(), "s3cr3t") || r.Lake.S3.AccessKeyID != "AKIA" {
		t.Errorf("redacted:\n%s", r.YAML())
	}
	if Default().Lake.S3.Enabled() {
		t.Error("S3 enabled by default")
	}

	bad := Default()
	bad.Lake.S3 = S3{Bucket: "b/x", Prefix: "a//b", Endpoint: "localhost:7070", AccessKeyID: "k", PartSize: 1 << 20}
	err = bad.Validate()
	for _, want := range []string{
		`lake.s3.bucket: "b/x" is not a bucket name`,
		`lake.s3.prefix: "a//b"`,
		`lake.s3.endpoint: "localhost:7070": want a URL`,
		"lake.s3.access_key_id: access_key_id and secret_access_key must be set together",
		"lake.s3.part_size: 1MiB out of range",
		"lake.s3.max_retries: must be positive",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	bad = Default()
	bad.Lake.S3.Endpoint = "http://127.0.0.1:7070"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "lake.s3.bucket: must be set") {
		t.Errorf("endpoint without bucket: %v", err)
	}
}
