//go:build !linux

package local

// linuxState is empty where the Linux implementation does not build.
type linuxState struct{} //nolint:unused // Backend embeds it on every system

// nativeImpl is the portable implementation: the only one here.
func nativeImpl(b *Backend) (impl, error) { return portableImpl{b}, nil }
