// Package s3test gives tests an s3 store: on gofakes3 in memory (always
// available, fast) or on the real S3 server named by the ENGENHO_S3_*
// environment (MinIO from .ci/minio.sh). A test that needs the real server
// calls Real, which skips on a laptop without it and fails when
// ENGENHO_REQUIRE names s3 (CI).
//
// Layer: drivers. It imports drivers/drivertest, drivers/objstore and
// drivers/objstore/s3; tests import it.
package s3test
