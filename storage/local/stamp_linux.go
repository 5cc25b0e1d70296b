package local

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/storage"
)

// A large file written by WriteIfVersion gets a stamp: a random value in an
// extended attribute, set under the compare-and-swap lock right after the
// rename and never changed. Its version is then its stat plus the stamp
// ("stamp:…"), valid from the moment it is written: no re-read and no hash
// of a half-gigabyte catalog, even for a file written a moment ago (a
// settled stat version needs 2 s). Two writes never share a stamp, so a
// reused inode number with the same size and timestamps (writes within one
// timestamp tick) still gets another version. A file without a stamp (the
// file system refuses extended attributes, a file written by hand or by an
// older distributor) is versioned by its stat fields alone.
//
// What a stamp does not see: another program rewriting the file in place
// (keeping its inode and attribute) with the same size within the same
// timestamp tick as distributor's write. Programs other than distributor
// must not write the catalog while distributor may (docs/catalog.md);
// on file systems with fine-grained timestamps (Linux ≥ 6.13 on ext4, xfs,
// btrfs, tmpfs: a change after a stat always gets a new ctime) it is seen.
const stampAttr = "user.distributor.stamp"

// stampLen is the hex length of a stamp (128 random bits).
const stampLen = 32

// stampedVersion is the version of the open file fd when it has a stamp.
// The attribute is read before the stat, so the stat includes the
// attribute's change of ctime.
func stampedVersion(fd int) (storage.Version, bool) {
	var buf [stampLen + 1]byte
	n, err := unix.Fgetxattr(fd, stampAttr, buf[:])
	if err != nil || n != stampLen {
		return "", false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return "", false
	}
	return storage.Version(fmt.Sprintf("stamp:%d:%d:%d:%d:%d:%s", st.Dev, st.Ino, st.Size,
		st.Mtim.Nano(), st.Ctim.Nano(), buf[:n])), true
}

// stamp gives the file at p (just written, under the lock) a fresh stamp
// and returns its version; ok is false when it could not.
func (b *Backend) stamp(r *os.Root, p string) (_ storage.Version, ok bool) {
	f, err := r.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var raw [stampLen / 2]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	if unix.Fsetxattr(int(f.Fd()), stampAttr, []byte(hex.EncodeToString(raw[:])), 0) != nil {
		return "", false
	}
	return stampedVersion(int(f.Fd()))
}

// currentStamped reports whether p is the stamped version want.
func (b *Backend) currentStamped(r *os.Root, p string, want storage.Version) (bool, error) {
	f, err := r.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if isMissing(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat %q in %s: %w", p, b.root, err)
	}
	defer f.Close()
	v, ok := stampedVersion(int(f.Fd()))
	return ok && v == want, nil
}
