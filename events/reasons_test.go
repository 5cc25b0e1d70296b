package events_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv/schematest"
)

// TestReasonsAreTheSchemaEnum: events.Reasons (the label values metrics
// start at zero) are exactly the reasons failed.json allows.
func TestReasonsAreTheSchemaEnum(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(schematest.RepoRoot(t), "docs", "schema", "failed.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Reason struct {
				Enum []string `json:"enum"`
			} `json:"reason"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	got, want := slices.Sorted(slices.Values(events.Reasons())), slices.Sorted(slices.Values(schema.Properties.Reason.Enum))
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("events.Reasons() = %v, want failed.json's enum %v", got, want)
	}
}
