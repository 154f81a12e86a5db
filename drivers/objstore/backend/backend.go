package backend

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/fs"
	"github.com/engenho/engenho/drivers/objstore/s3"
)

// Kinds of store.
const (
	KindFS = "fs"
	KindS3 = "s3"
)

// DefaultPrefix is the key prefix when Config leaves it empty.
const DefaultPrefix = "engenho"

// Config is the objstore section of the daemon config.
type Config struct {
	// Kind is "fs" (default) or "s3".
	Kind string `mapstructure:"kind"`
	// Prefix of every key (lease and checkpoint objects); default
	// "engenho". Nodes sharing hosts must use the same prefix.
	Prefix string `mapstructure:"prefix"`
	// FS settings, for kind fs.
	FS FSConfig `mapstructure:"fs"`
	// S3 settings, for kind s3.
	S3 s3.Config `mapstructure:"s3"`
}

// FSConfig configures the fs store.
type FSConfig struct {
	// Dir of the fs store; default DATA_DIR/objstore. Two daemons pointed
	// at one shared directory share one bucket.
	Dir string `mapstructure:"dir"`
}

// Open opens the configured store and returns it with the key prefix to
// use. dataDir is the daemon's data directory (the fs default lives under
// it). The returned close func releases the store.
func Open(ctx context.Context, cfg Config, dataDir string, clk clock.Clock) (objstore.Store, string, func() error, error) {
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := objstore.ValidPrefix(prefix); err != nil {
		return nil, "", nil, fmt.Errorf("objstore.prefix: %w", err)
	}
	switch cfg.Kind {
	case "", KindFS:
		dir := cfg.FS.Dir
		if dir == "" {
			if dataDir == "" {
				return nil, "", nil, fmt.Errorf("objstore.fs.dir: not set and no data directory")
			}
			dir = filepath.Join(dataDir, "objstore")
		}
		s, err := fs.Open(dir, fs.Options{Clock: clk})
		if err != nil {
			return nil, "", nil, err
		}
		return s, prefix, s.Close, nil
	case KindS3:
		s, err := s3.New(ctx, cfg.S3)
		if err != nil {
			return nil, "", nil, err
		}
		return s, prefix, s.Close, nil
	default:
		return nil, "", nil, fmt.Errorf("objstore.kind %q: want %q or %q", cfg.Kind, KindFS, KindS3)
	}
}
