package engine

// ReadIntent is readIntent, for the external tests.
var ReadIntent = readIntent
