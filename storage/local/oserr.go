package local

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/distributor/distributor/storage"
)

// osError is an OS error read as what it means for the root: the storage
// sentinel (ErrUnavailable: may pass; ErrDenied: needs an operator) and
// what to do about it.
type osError struct {
	err  error // as the operation returned it, naming the path
	kind error
	hint string
}

func (e *osError) Error() string   { return e.err.Error() + ": " + e.hint }
func (e *osError) Unwrap() []error { return []error{e.err, e.kind} }

// Classify maps the OS errors that describe the root's file system rather
// than one path: a full disk may be freed and an I/O or busy error may
// pass, so they are transient; a folder without permission or a read-only
// mount stays so until someone fixes it. Other errors pass unchanged.
func Classify(root string, err error) error {
	var errno syscall.Errno
	if err == nil || !errors.As(err, &errno) || errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrDenied) {
		return err
	}
	kind, hint := storage.ErrUnavailable, ""
	switch classOf(errno) {
	case classFull:
		hint = fmt.Sprintf("%s is full (no space or quota left): free space there; serve retries with back-off", root)
	case classIO:
		hint = fmt.Sprintf("I/O error under %s: check the disk; serve retries with back-off", root)
	case classBusy:
		hint = fmt.Sprintf("%s is busy or timed out; serve retries with back-off", root)
	case classDenied:
		kind, hint = storage.ErrDenied, fmt.Sprintf("no permission in %s: fix the permissions so that the user distributor runs as can read and write there", root)
	case classReadOnly:
		kind, hint = storage.ErrDenied, fmt.Sprintf("%s is on a read-only file system: remount it read-write", root)
	default:
		return err
	}
	return &osError{err: err, kind: kind, hint: hint}
}

// errClass is what an OS error says about the root's file system; classOf
// reads it from the system's own error numbers (oserr_unix.go,
// oserr_windows.go).
type errClass int

const (
	classOther    errClass = iota // about one path, or unknown: passed unchanged
	classFull                     // no space or quota left
	classIO                       // an I/O error
	classBusy                     // busy or timed out
	classDenied                   // no permission
	classReadOnly                 // a read-only file system
)

// classifyTo is Classify for a deferred call on a named error result.
func (b *Backend) classifyTo(err *error) { *err = Classify(b.root, *err) }
