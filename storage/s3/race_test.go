//go:build race

package s3_test

const raceEnabled = true
