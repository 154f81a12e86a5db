package daemonconfig

import (
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// DataDirOf is the data directory the config at path names, read on its
// own: the --data-dir flag (o.DataDir), else ENGENHO_DATA_DIR, else the
// file's data_dir, else the default, relative paths resolved as Load
// resolves them. A daemon whose config does not load uses it to lock and
// serve the data directory the operator meant, so `engenho status` there
// shows the config's errors, instead of the default directory's. A file
// that cannot be read or whose data_dir is not a string gives the default.
func DataDirOf(path string, o Overrides) string {
	if o.DataDir != "" {
		if abs, err := filepath.Abs(o.DataDir); err == nil {
			return abs
		}
		return o.DataDir
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Defaults().DataDir
	}
	resolve := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(filepath.Dir(abs), p)
	}
	if v, ok := os.LookupEnv(schema().byKey["data_dir"].env); ok && v != "" {
		return resolve(v)
	}
	raw, err := os.ReadFile(abs)
	if err != nil || len(raw) > 16<<20 {
		return Defaults().DataDir
	}
	var doc yaml.Node
	if yaml.Unmarshal(raw, &doc) != nil || len(doc.Content) != 1 {
		return Defaults().DataDir
	}
	top := deref(doc.Content[0])
	if top == nil || top.Kind != yaml.MappingNode {
		return Defaults().DataDir
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := deref(top.Content[i]), deref(top.Content[i+1])
		if k != nil && k.Value == "data_dir" {
			if v == nil || v.Kind != yaml.ScalarNode || v.Tag != "!!str" || v.Value == "" {
				break
			}
			return resolve(v.Value)
		}
	}
	return Defaults().DataDir
}
