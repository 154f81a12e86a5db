package s3_test

import (
	"testing"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/s3"
	"github.com/engenho/engenho/drivers/objstore/s3/s3test"
	"github.com/engenho/engenho/drivers/objstore/storetest"
)

func smallParts(c *s3.Config) { c.PartSize = s3.MinPartSize; c.PageSize = 3 }

// DRV-8, DRV-10: the s3 store on gofakes3 passes the conformance suite.
// gofakes3 ignores If-Match on DELETE and conditions on
// CompleteMultipartUpload, so those two capabilities are off, and its
// CompleteMultipartUpload answers with an ETag Get never reports.
func TestConformanceGofakes3(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return s3test.Fake(t, smallParts) },
		storetest.Caps{LargeSize: 12 << 20, LargePutETagDiffers: true})
}

// DRV-8, DRV-10: the s3 store on real MinIO passes the conformance suite,
// conditional multipart completion included. MinIO ignores If-Match on
// DELETE (the lease never relies on it).
func TestConformanceMinIO(t *testing.T) {
	s3test.Real(t, nil) // skip or fail once, before the subtests
	storetest.Run(t, func(t *testing.T) objstore.Store { return s3test.Real(t, smallParts) },
		storetest.Caps{ConditionalLarge: true, LargeSize: 12 << 20})
}
