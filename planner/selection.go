package planner

import (
	"strings"

	"github.com/distributor/distributor/catalog"
)

// Selection is what of a root Build reads to plan one publication: the
// records of its owner, and the records and stored objects at a desired
// path, at a folder on the way to one, or below one. A plan made with
// Input.Catalog holding only the records Record selects (and the
// catalog's own fields), and Input.Stored only the objects Path selects
// (all of them on a legacy root), is the plan of the whole root, but
// that its Next holds only the selected records after the plan: every
// other record stays as it is. A publication to a root of a million
// records then holds the few it changes, not the million.
type Selection struct {
	owner   catalog.Owner
	paths   map[string]bool // desired
	folders map[string]bool // on the way to a desired path
}

// Select returns the selection of a publication by owner of desired.
func Select(owner catalog.Owner, desired []Desired) *Selection {
	s := &Selection{owner: owner, paths: make(map[string]bool, len(desired)), folders: map[string]bool{}}
	for i := range desired {
		p := desired[i].Path
		s.paths[p] = true
		for j := strings.LastIndexByte(p, '/'); j > 0; j = strings.LastIndexByte(p[:j], '/') {
			if s.folders[p[:j]] {
				break // and the folders above it
			}
			s.folders[p[:j]] = true
		}
	}
	return s
}

// Desired is how many desired paths the selection holds: about how many
// records a republish selects.
func (s *Selection) Desired() int { return len(s.paths) }

// Record reports whether the plan reads record o.
func (s *Selection) Record(o *catalog.Output) bool {
	return o.PipelineID == s.owner.PipelineID && o.DestinationID == s.owner.DestinationID || s.Path(o.Path)
}

// Path reports whether the plan reads what is at path p: p is desired, a
// folder on the way to a desired path, or below one.
func (s *Selection) Path(p string) bool {
	if s.paths[p] || s.folders[p] {
		return true
	}
	for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
		if s.paths[p[:i]] {
			return true
		}
	}
	return false
}
