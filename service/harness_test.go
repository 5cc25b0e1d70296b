package service_test

import (
	"testing"

	"github.com/distributor/distributor/testenv/enginetest"
)

// The harness of these tests (package enginetest), under the short names
// the tests use.

// harness is enginetest.Harness, with the helpers these tests add.
type harness struct{ *enginetest.Harness }

func newHarness(t *testing.T) *harness { return &harness{enginetest.NewHarness(t)} }

type (
	testStores  = enginetest.Stores
	clock       = enginetest.Clock
	newRootFunc = enginetest.NewRootFunc
)

const (
	pipeA = enginetest.PipeA
	pipeB = enginetest.PipeB
)

var (
	t0 = enginetest.T0
	t1 = enginetest.T1
	t2 = enginetest.T2

	forEachBackend         = enginetest.ForEachBackend
	makeBundle             = enginetest.MakeBundle
	makeBundleAt           = enginetest.MakeBundleAt
	contents               = enginetest.Contents
	mustRead               = enginetest.MustRead
	assertDescribesStorage = enginetest.AssertDescribesStorage
	equalMaps              = enginetest.EqualMaps
	newLocalRoot           = enginetest.NewLocalRoot
	snapshot               = enginetest.Snapshot
	diff                   = enginetest.Diff
	wantNoRecordOf         = enginetest.WantNoRecordOf
	intentPending          = enginetest.IntentPending
	named                  = enginetest.Named
	mustRecord             = enginetest.MustRecord
	wantContents           = enginetest.WantContents
	wantStrings            = enginetest.WantStrings
)
