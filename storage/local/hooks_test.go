package local

// withSyncHook tells fn of every fsync the backend makes: kind "file" or
// "folder", and the folder.
func withSyncHook(fn func(kind, dir string)) Option { return func(b *Backend) { b.onSync = fn } }

// withGeneralHook tells fn of every operation that takes the general
// os.Root path instead of openat2.
func withGeneralHook(fn func(op string)) Option { return func(b *Backend) { b.onGeneral = fn } }
