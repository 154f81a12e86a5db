package stackfile

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers"
)

// Compose spec, services.volumes: the short syntax is
// [SOURCE:]TARGET[:MODE]; a SOURCE starting with "/", "." or "~" is a
// host path (a bind), relative ones taken from the project directory;
// any other SOURCE is the key of a top-level volume. The long syntax is
// {type, source, target, read_only, bind, volume, tmpfs, consistency}.
// Top-level volumes are named PROJECT_KEY unless `name:` is set, and an
// external volume is named by its key (or name:) and never created by
// Compose.
func TestServiceVolumesCompose(t *testing.T) {
	dir := t.TempDir()
	top := "volumes:\n  data:\n  logs: {}\n  shared: {name: common-cache}\n  old: {external: true}\n  ext: {external: true, name: site-media}\n"
	cases := []struct {
		name string
		vols string // the service's volumes: value
		want []VolumeMount
	}{
		{"short named volume", "[data:/var/lib/data]",
			[]VolumeMount{{Type: drivers.MountVolume, Volume: "data", Source: "t_data", Target: "/var/lib/data"}}},
		{"short named volume ro", "[data:/srv:ro]",
			[]VolumeMount{{Type: drivers.MountVolume, Volume: "data", Source: "t_data", Target: "/srv", ReadOnly: true}}},
		{"short rw is the default", "[logs:/logs:rw]",
			[]VolumeMount{{Type: drivers.MountVolume, Volume: "logs", Source: "t_logs", Target: "/logs"}}},
		{"short mode list with nocopy", "[\"data:/srv:ro,nocopy\"]",
			[]VolumeMount{{Type: drivers.MountVolume, Volume: "data", Source: "t_data", Target: "/srv", ReadOnly: true}}},
		{"top-level name: replaces STACK_KEY", "[shared:/cache]",
			[]VolumeMount{{Type: drivers.MountVolume, Volume: "shared", Source: "common-cache", Target: "/cache"}}},
		{"external volume keeps its key", "[old:/old]",
			[]VolumeMount{{Type: drivers.MountVolume, Volume: "old", Source: "old", Target: "/old", External: true}}},
		{"external volume with name", "[ext:/media]",
			[]VolumeMount{{Type: drivers.MountVolume, Volume: "ext", Source: "site-media", Target: "/media", External: true}}},
		{"short absolute bind", "[/etc/ssl/certs:/certs:ro]",
			[]VolumeMount{{Type: drivers.MountBind, Source: "/etc/ssl/certs", Target: "/certs", ReadOnly: true}}},
		{"short absolute bind is cleaned", "[/srv//site/:/site]",
			[]VolumeMount{{Type: drivers.MountBind, Source: "/srv/site", Target: "/site"}}},
		{"short relative bind from the project directory", "[./conf:/etc/app]",
			[]VolumeMount{{Type: drivers.MountBind, Source: filepath.Join(dir, "conf"), Target: "/etc/app"}}},
		{"short parent-relative bind", "[../shared:/shared]",
			[]VolumeMount{{Type: drivers.MountBind, Source: filepath.Join(filepath.Dir(dir), "shared"), Target: "/shared"}}},
		{"short project directory itself", "[.:/app]",
			[]VolumeMount{{Type: drivers.MountBind, Source: dir, Target: "/app"}}},
		{"long volume", "[{type: volume, source: data, target: /data, read_only: true, volume: {nocopy: true}}]",
			[]VolumeMount{{Type: drivers.MountVolume, Volume: "data", Source: "t_data", Target: "/data", ReadOnly: true}}},
		{"long type defaults to volume", "[{source: data, target: /data}]",
			[]VolumeMount{{Type: drivers.MountVolume, Volume: "data", Source: "t_data", Target: "/data"}}},
		{"long bind, relative without ./", "[{type: bind, source: static, target: /www, bind: {create_host_path: false}}]",
			[]VolumeMount{{Type: drivers.MountBind, Source: filepath.Join(dir, "static"), Target: "/www"}}},
		{"file order kept", "[/b:/b, data:/a]",
			[]VolumeMount{{Type: drivers.MountBind, Source: "/b", Target: "/b"}, {Type: drivers.MountVolume, Volume: "data", Source: "t_data", Target: "/a"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := "name: t\nservices:\n  api:\n    command: run\n    volumes: " + tc.vols + "\n" + top
			st, err := ParseWith("t.yaml", []byte(src), Options{Dir: dir})
			if err != nil {
				t.Fatalf("Parse:\n%v\n%s", err, src)
			}
			if got := st.Services["api"].Volumes; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("volumes\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestTopLevelVolumesCompose(t *testing.T) {
	src := `name: shop
services:
  db: {command: run, volumes: [pg:/var/lib/postgresql/data]}
volumes:
  pg:
    driver: local
    labels: {team: data}
  media: {name: shop-media}
  legacy: {external: {name: old-media}}
  outside: {external: true}
  x-note: {}
`
	st, err := ParseWith("shop.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Volume{
		"pg":      {Name: "shop_pg"},
		"media":   {Name: "shop-media"},
		"legacy":  {Name: "old-media", External: true},
		"outside": {Name: "outside", External: true},
		"x-note":  {Name: "shop_x-note"},
	}
	if !reflect.DeepEqual(st.Volumes, want) {
		t.Errorf("volumes\n got %+v\nwant %+v", st.Volumes, want)
	}
	// remove --volumes deletes what engenho made, never an external one.
	if got, want := st.VolumeNames(), []string{"shop-media", "shop_pg", "shop_x-note"}; !reflect.DeepEqual(got, want) {
		t.Errorf("VolumeNames = %v, want %v", got, want)
	}
	if !hasWarning(st.Warnings, "volumes.pg.labels", "no labels") {
		t.Errorf("labels: no warning in %v", st.Warnings)
	}
}

func hasWarning(ws []Problem, key, msg string) bool {
	for _, w := range ws {
		if w.Key == key && errors.Is(w.Err, ErrWarning) && strings.Contains(w.Msg, msg) {
			return true
		}
	}
	return false
}

func TestVolumeWarningsCompose(t *testing.T) {
	cases := []struct {
		name, vols, key, msg string
	}{
		{"SELinux z", "[\"./a:/a:z\"]", "services.api.volumes[0]", "SELinux"},
		{"create_host_path true", "[{type: bind, source: /srv, target: /srv, bind: {create_host_path: true}}]", "services.api.volumes[0].bind.create_host_path", "creates no host path"},
		{"propagation", "[{type: bind, source: /srv, target: /srv, bind: {propagation: rshared}}]", "services.api.volumes[0].bind.propagation", "private"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := stackYAML("volumes: "+tc.vols, true)
			st, err := ParseWith("t.yaml", []byte(src), Options{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if !hasWarning(st.Warnings, tc.key, tc.msg) {
				t.Errorf("no warning %s: %q in %v", tc.key, tc.msg, st.Warnings)
			}
		})
	}
}

func TestVolumeErrorsCompose(t *testing.T) {
	top := "volumes:\n  data: {}\n"
	cases := []struct {
		name string
		body string // services.api body after command: run
		top  string
		dir  bool
		key  string
		line int // file line
		msg  string
	}{
		{"undeclared named volume", "volumes: [cache:/cache]", top, true, "services.api.volumes[0]", 5, `volume "cache" is not declared`},
		{"anonymous short", "volumes: [/var/cache]", top, true, "services.api.volumes[0]", 5, "anonymous volume"},
		{"anonymous long", "volumes: [{type: volume, target: /x}]", top, true, "services.api.volumes[0]", 5, "anonymous volume"},
		{"relative target", "volumes: [data:data]", top, true, "services.api.volumes[0]", 5, "want a clean absolute path"},
		{"unclean target", "volumes: [data:/a/../b]", top, true, "services.api.volumes[0]", 5, "want a clean absolute path"},
		{"root target", "volumes: [data:/]", top, true, "services.api.volumes[0]", 5, "over the root"},
		{"target twice", "volumes: [data:/d, /srv:/d]", top, true, "services.api.volumes[1]", 5, "mounted twice"},
		{"bad mode", "volumes: [data:/d:rx]", top, true, "services.api.volumes[0]", 5, `mode "rx"`},
		{"too many parts", "volumes: [a:b:c:d]", top, true, "services.api.volumes[0]", 5, "SOURCE:TARGET[:MODE]"},
		{"home bind", "volumes: [~/x:/x]", top, true, "services.api.volumes[0]", 5, "~"},
		{"relative bind without a project directory", "volumes: [./x:/x]", top, false, "services.api.volumes[0]", 5, "needs the project directory"},
		{"tmpfs refused", "volumes: [{type: tmpfs, target: /tmp}]", top, true, "services.api.volumes[0].type", 5, "tmpfs mounts are not supported"},
		{"npipe refused", "volumes: [{type: npipe, source: x, target: /x}]", top, true, "services.api.volumes[0].type", 5, `type "npipe" is not supported`},
		{"long without target", "volumes: [{source: data}]", top, true, "services.api.volumes[0].target", 5, "required"},
		{"long bind without source", "volumes: [{type: bind, target: /x}]", top, true, "services.api.volumes[0].source", 5, "required for a bind"},
		{"long volume with a path source", "volumes: [{type: volume, source: ./x, target: /x}]", top, true, "services.api.volumes[0].source", 5, "not a path"},
		{"long subpath", "volumes: [{source: data, target: /x, volume: {subpath: a}}]", top, true, "services.api.volumes[0].volume.subpath", 5, "not supported"},
		{"long unknown key", "volumes: [{source: data, target: /x, mode: ro}]", top, true, "services.api.volumes[0].mode", 5, "unknown key"},
		{"volumes not a list", "volumes: {data: /x}", top, true, "services.api.volumes", 5, "want a list"},
		{"volume driver", "volumes: [data:/d]", "volumes:\n  data: {driver: nfs}\n", true, "volumes.data.driver", 7, `volume driver "nfs" is not supported`},
		{"driver_opts", "volumes: [data:/d]", "volumes:\n  data:\n    driver_opts: {type: none, o: bind, device: /srv}\n", true, "volumes.data.driver_opts", 8, "use a bind mount"},
		{"unsafe volume name", "volumes: [data:/d]", "volumes:\n  data: {name: ../etc}\n", true, "volumes.data.name", 7, "volume name"},
		{"unsafe volume key", "volumes: [data:/d]", "volumes:\n  data: {}\n  _x: {}\n", true, "volumes._x", 8, "a volume key"},
		{"top-level unknown key", "volumes: [data:/d]", "volumes:\n  data: {size: 1G}\n", true, "volumes.data.size", 7, "unknown key"},
		{"name too long", "volumes: [data:/d]", "volumes:\n  data: {name: " + strings.Repeat("a", 129) + "}\n", true, "volumes.data.name", 7, "at most 128"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := "name: t\nservices:\n  api:\n    command: run\n    " + tc.body + "\n" + tc.top
			opts := Options{}
			if tc.dir {
				opts.Dir = t.TempDir()
			}
			_, err := ParseWith("t.yaml", []byte(src), opts)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse accepted (or failed otherwise: %v):\n%s", err, src)
			}
			for _, p := range pe.Problems {
				if p.Key == tc.key && strings.Contains(p.Msg, tc.msg) {
					if p.Line != tc.line {
						t.Errorf("%s at line %d, want %d", p, p.Line, tc.line)
					}
					if !errors.Is(err, p.Err) || (!errors.Is(p.Err, ErrValue) && !errors.Is(p.Err, ErrMissing) && !errors.Is(p.Err, ErrType) && !errors.Is(p.Err, ErrUnknownKey)) {
						t.Errorf("%s: kind %v", p, p.Err)
					}
					if len(pe.Problems) != 1 {
						t.Errorf("want one problem, got %v", pe.Problems)
					}
					return
				}
			}
			t.Errorf("no problem %s: %q in\n%v", tc.key, tc.msg, err)
		})
	}
}

// Every problem at once: two services, three volume problems.
func TestVolumeErrorsAllAtOnce(t *testing.T) {
	src := "name: t\nservices:\n  a: {command: run, volumes: [nope:/x]}\n  b: {command: run, volumes: [/y, \"/z:/z:bad\"]}\n"
	ps := parseProblems(t, "t.yaml", src)
	if len(ps) != 3 {
		t.Fatalf("want 3 problems, got %v", ps)
	}
	for _, p := range ps {
		if !strings.HasPrefix(p.String(), "t.yaml:") || p.Line < 3 {
			t.Errorf("problem not located: %s", p)
		}
	}
}

func TestVolumesInInstanceSpec(t *testing.T) {
	src := `name: t
services:
  api:
    command: run
    volumes: [data:/var/data, "/etc/ssl:/etc/ssl:ro"]
    sidecars:
      - {name: backup, command: [backup]}
volumes: {data: {}}
`
	st := mustParse(t, "t.yaml", src)
	svc := st.Services["api"]
	want := []drivers.Mount{
		{Type: drivers.MountBind, Source: "/etc/ssl", Target: "/etc/ssl", ReadOnly: true},
		{Type: drivers.MountVolume, Source: "t_data", Target: "/var/data"},
	}
	inst := Instance{Stack: "t", Slot: 1, ID: "a1"}
	if got := InstanceSpec(svc, inst).Mounts; !reflect.DeepEqual(got, want) {
		t.Errorf("instance mounts\n got %+v\nwant %+v", got, want)
	}
	// Sidecars share the service's volumes.
	if got := SidecarSpec(svc, svc.Sidecars[0], inst).Mounts; !reflect.DeepEqual(got, want) {
		t.Errorf("sidecar mounts\n got %+v\nwant %+v", got, want)
	}
}

// SVC-3: what an instance sees of its mounts is part of its revision;
// the order they are written in is not.
func TestVolumesInRevisionSVC3(t *testing.T) {
	rev := func(vols string, top string) (string, string) {
		st := mustParse(t, "t.yaml", "name: t\nservices:\n  api:\n    command: run\n    volumes: "+vols+"\n    sidecars: [{name: s, command: [s]}]\n"+top)
		svc := st.Services["api"]
		return svc.Revision(), svc.SidecarRevision(svc.Sidecars[0])
	}
	top := "volumes: {data: {}, other: {}}\n"
	base, baseSC := rev("[data:/d, /srv:/srv]", top)
	if r, _ := rev("[/srv:/srv, data:/d]", top); r != base {
		t.Errorf("reordered mounts changed the revision")
	}
	for name, vols := range map[string][2]string{
		"read-only":      {"[data:/d:ro, /srv:/srv]", top},
		"other target":   {"[data:/e, /srv:/srv]", top},
		"other volume":   {"[other:/d, /srv:/srv]", top},
		"renamed volume": {"[data:/d, /srv:/srv]", "volumes: {data: {name: d2}, other: {}}\n"},
		"other bind":     {"[data:/d, /opt:/srv]", top},
		"one less":       {"[data:/d]", top},
	} {
		r, sc := rev(vols[0], vols[1])
		if r == base {
			t.Errorf("%s: revision unchanged", name)
		}
		if sc == baseSC {
			t.Errorf("%s: sidecar revision unchanged", name)
		}
	}
	// A service without volumes keeps the revision it had before volumes
	// existed (no "mounts" key in the hashed input).
	plain := mustParse(t, "t.yaml", "name: t\nservices:\n  api: {command: run}\n").Services["api"]
	noVols := mustParse(t, "t.yaml", "name: t\nservices:\n  api: {command: run, volumes: []}\n").Services["api"]
	if plain.Revision() != noVols.Revision() {
		t.Errorf("volumes: [] changed the revision")
	}
}

// The journal keeps volumes (Marshal, Unmarshal) and Check judges a stack
// read back as Parse would.
func TestVolumesJournalRoundTrip(t *testing.T) {
	st := mustParse(t, "t.yaml", "name: t\nservices:\n  api: {command: run, volumes: [data:/d, \"/srv:/srv:ro\"]}\nvolumes: {data: {}, ext: {external: true}}\n")
	b, err := Marshal(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Volumes, st.Volumes) || !reflect.DeepEqual(back.Services["api"].Volumes, st.Services["api"].Volumes) {
		t.Errorf("round trip: got %+v %+v", back.Volumes, back.Services["api"].Volumes)
	}
	if back.Services["api"].Revision() != st.Services["api"].Revision() {
		t.Errorf("revision changed through the journal")
	}
	// A record whose mount names a volume the stack does not declare.
	bad := back.Clone()
	delete(bad.Volumes, "data")
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "not declared") {
		t.Errorf("Check of an undeclared volume: %v", err)
	}
	// A mount that says external when its volume is not.
	bad = back.Clone()
	svc := bad.Services["api"]
	for i := range svc.Volumes {
		svc.Volumes[i].External = svc.Volumes[i].Type == drivers.MountVolume
	}
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "external is true here and false at the top level") {
		t.Errorf("Check of a mismatched external: %v", err)
	}
}

func TestVolumesRendered(t *testing.T) {
	st := mustParse(t, "t.yaml", "name: t\nservices:\n  api: {command: run, volumes: [data:/d]}\nvolumes: {data: {}}\n")
	out, err := RenderYAML(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"        volumes:\n            - type: volume\n              volume: data\n              source: t_data\n              target: /d\n", "\nvolumes:\n    data:\n        name: t_data\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rendering lacks %q:\n%s", want, out)
		}
	}
}
