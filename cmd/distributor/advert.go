package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/internal/process"
	"github.com/distributor/distributor/natsserver"
)

// advertFile is the file in nats.store_dir through which `serve` with an
// embedded server tells direct-mode commands of the same configuration
// where its NATS is. Without it they use no NATS at all: whatever else
// listens on nats.listen is a stranger.
const advertFile = "serve.json"

// advert is the content of advertFile.
type advert struct {
	URL        string `json:"url"`
	ServerName string `json:"server_name"`
	ServerID   string `json:"server_id"`
	PID        int    `json:"pid"`

	// Config is configHash of the configuration `serve` runs with.
	Config string `json:"config"`
}

// configHash identifies a configuration file by its absolute path.
func configHash(file string) string {
	if abs, err := filepath.Abs(file); err == nil {
		file = abs
	}
	sum := sha256.Sum256([]byte(file))
	return hex.EncodeToString(sum[:])
}

// writeAdvert advertises srv in cfg's store folder; the returned function
// removes the advertisement (only if it is still srv's).
func writeAdvert(cfg *config.Config, srv *natsserver.Server) (func(), error) {
	ad := advert{URL: srv.ClientURL(), ServerName: srv.Name(), ServerID: srv.ID(), PID: os.Getpid(), Config: configHash(cfg.File)}
	path := filepath.Join(cfg.NATS.StoreDir, advertFile)
	data, _ := json.Marshal(ad)

	// Written whole, then renamed: a reader never sees half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("advertise the embedded NATS server: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("advertise the embedded NATS server: %w", err)
	}
	return func() {
		if cur, err := readAdvertFile(path); err == nil && cur.ServerID == ad.ServerID {
			os.Remove(path)
		}
	}, nil
}

func readAdvertFile(path string) (advert, error) {
	var ad advert
	data, err := os.ReadFile(path)
	if err != nil {
		return ad, err
	}
	if err := json.Unmarshal(data, &ad); err != nil {
		return ad, fmt.Errorf("%s: %w", path, err)
	}
	return ad, nil
}

// findAdvert returns the advertisement of a running `serve` of cfg, or why
// there is none.
func findAdvert(cfg *config.Config) (advert, error) {
	ad, err := readAdvertFile(filepath.Join(cfg.NATS.StoreDir, advertFile))
	switch {
	case err != nil:
		return ad, err
	case ad.URL == "" || ad.ServerID == "":
		return ad, errors.New("the advertisement names no server")
	case ad.Config != configHash(cfg.File):
		return ad, errors.New("the advertising serve runs another configuration")
	case !process.Alive(ad.PID):
		return ad, fmt.Errorf("the advertising serve (pid %d) is gone", ad.PID)
	}
	return ad, nil
}
