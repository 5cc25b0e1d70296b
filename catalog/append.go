package catalog

// AppendOutputs appends outs to b as the JSON array Marshal writes for a
// catalog's outputs (same bytes, same indentation), in the order given and
// without validating them: for records validated already (the planner's,
// or records read from a catalog), written somewhere other than the
// catalog (the engine's intent). Marshal stays the only way to write a
// catalog, and validates what it encodes.
func AppendOutputs(b []byte, outs []Output) []byte {
	if len(outs) == 0 {
		return append(b, "[]"...)
	}
	var t timeCache
	b = append(b, '[')
	for i := range outs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		b = t.appendOutput(b, &outs[i])
		if i == 0 {
			b = growFor(b, len(outs))
		}
	}
	return append(b, "\n  ]"...)
}

// growFor makes room for n records the size of the last one written.
func growFor(b []byte, n int) []byte {
	if n <= 1 || cap(b)-len(b) >= len(b)*(n-1) {
		return b
	}
	nb := make([]byte, len(b), len(b)*n+16)
	copy(nb, b)
	return nb
}
