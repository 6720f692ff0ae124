// Package s3test starts a real S3-compatible server (versitygw over a
// temporary directory) for tests of the S3 lake store and what uses it.
//
// The binary is $SLUICE_S3_SERVER or .tools/bin/versitygw under the module
// root (scripts/test.sh installs it there). When it is missing the test is
// skipped, or fails when SLUICE_REQUIRE_ALL is set.
package s3test
