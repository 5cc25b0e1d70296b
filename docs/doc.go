// Package docs is distributor's user documentation: Markdown pages for
// operators and integrators (configuration, CLI, events, catalog,
// guarantees, operations, benchmarks) and, in schema/, the JSON Schemas of
// every event and catalog distributor writes.
//
// It holds no code. Its test keeps the pages honest: every relative link
// resolves inside the repository, and every JSON example validates against
// its schema and decodes with distributor's own decoder (the code's tests
// check what the code writes against the same schemas, through
// testenv/schematest).
package docs
