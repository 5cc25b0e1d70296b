package local

// testImpls: Linux's own implementation and the portable one.
var testImpls = []testImpl{{"linux", nil}, {"portable", []Option{Portable()}}}

// generalPaths tune Linux's own implementation onto its general path,
// the one a kernel without openat2 takes.
var generalPaths = map[string]func(*Backend){
	"linux-general": func(b *Backend) { b.noOpenat2.Store(true) },
}
