// Package layers holds the test that keeps the project's packages in their
// layers, so that `go test ./...` enforces them even where the linter does
// not run:
//
//   - planner is pure: of the project it imports only catalog, and nothing
//     outside the standard library;
//   - no package imports a command (cmd/...);
//   - storage backends (storage/local, storage/s3) depend on none of the
//     layers above storage: engine, consumer, planner, lease, events, config;
//   - the engine imports neither NATS nor events, the service nor the
//     consumer.
//
// The dependency direction is cmd → consumer → service → engine → planner,
// storage, lease; see docs/architecture.md.
package layers
