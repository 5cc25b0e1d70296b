// Package layers holds the test that keeps the project's packages in their
// layers, so that `go test ./...` enforces them even where the linter does
// not run:
//
//   - planner is pure: of the project it imports only catalog, and nothing
//     outside the standard library;
//   - no package imports a command (cmd/...);
//   - storage backends (storage/local, storage/s3) depend on none of the
//     layers above storage: engine, consumer, planner, lease, events, config;
//   - the engine imports neither NATS nor events, the configuration nor
//     transforms, the service nor the consumer;
//   - service is the one package above the engine: no other imports it
//     (tests and test support may);
//   - test-support packages (testenv/..., storage/storagetest,
//     lease/leasetest) are imported by tests and other test support only;
//   - no non-test function is longer than 80 lines (funlen_test.go).
//
// The dependency direction is cmd → consumer → service → engine → planner,
// storage, lease; see docs/architecture.md.
package layers
