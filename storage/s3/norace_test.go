//go:build !race

package s3store_test

const raceEnabled = false
