package incus

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// setup.sh's apt functions, run with bash against sample apt directories in
// a temp dir (never the machine's /etc/apt). DRV-7: incus comes from
// bookworm-backports, added on the mirror the machine's own sources name.

const (
	keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	// debianSources is the layout of a Debian 12 image: the main archive
	// and the security archive in one deb822 file.
	debianSources = `Types: deb
# a comment inside the paragraph
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: ` + keyring + `

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: ` + keyring + `
`
)

// setupFunc runs one function of setup.sh with args; it returns stdout,
// stderr and the exit code.
func setupFunc(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	script, err := filepath.Abs("setup.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{"-c", `source "$1" && shift && "$@"`, "setup-test", script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return stdout.String(), stderr.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("bash: %v", err)
	}
	return stdout.String(), stderr.String(), 0
}

// aptDir writes files (paths relative to an apt etc dir) into a temp dir.
func aptDir(t *testing.T, files map[string]string) string {
	t.Helper()
	etc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(etc, "sources.list.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return etc
}

func header(etc, file string) string {
	return "# bookworm-backports on the mirror of " + filepath.Join(etc, file) + " (added by engenho drivers/incus/setup.sh)\n"
}

// DRV-7: the backports entry is on the main archive's mirror, in the
// format of the entry it came from, with its Signed-By or options.
func TestSetupBackportsEntryUsesTheMachinesMirror(t *testing.T) {
	const embeddedKey = "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBGP\n -----END PGP PUBLIC KEY BLOCK-----\n"
	cases := []struct {
		name  string
		files map[string]string
		from  string // the file the entry comes from
		want  string // after the header line
	}{{
		name:  "deb822 main and security archives",
		files: map[string]string{"sources.list.d/debian.sources": debianSources},
		from:  "sources.list.d/debian.sources",
		want:  "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: " + keyring + "\n",
	}, {
		name: "sources.list with options, deb-src and security lines",
		files: map[string]string{"sources.list": "# deb http://old.example/debian bookworm main\n" +
			"deb-src http://src.example/debian bookworm main\n" +
			"deb [arch=amd64 signed-by=" + keyring + "] http://mirror.example/debian-security bookworm-security main\n" +
			"deb [ arch=amd64 signed-by=" + keyring + " ] http://mirror.example/debian bookworm main contrib # the archive\n"},
		from: "sources.list",
		want: "deb [ arch=amd64 signed-by=" + keyring + " ] http://mirror.example/debian bookworm-backports main\n",
	}, {
		name:  "sources.list without options",
		files: map[string]string{"sources.list": "deb http://mirror.example/debian/ bookworm main\n"},
		from:  "sources.list",
		want:  "deb http://mirror.example/debian/ bookworm-backports main\n",
	}, {
		name: "disabled paragraph, lower-case fields, continuation lines, two URIs",
		files: map[string]string{"sources.list.d/debian.sources": "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n\n" +
			"types: deb deb-src\nuris: http://a.example/debian\n http://b.example/debian\nSUITES: bookworm\nComponents: main contrib\n"},
		from: "sources.list.d/debian.sources",
		want: "Types: deb\nURIs: http://a.example/debian http://b.example/debian\nSuites: bookworm-backports\nComponents: main\n",
	}, {
		name:  "embedded key copied as written",
		files: map[string]string{"sources.list.d/debian.sources": "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\n" + embeddedKey},
		from:  "sources.list.d/debian.sources",
		want:  "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm-backports\nComponents: main\n" + embeddedKey,
	}, {
		name: "a vendor's bookworm suite loses to the /debian archive",
		files: map[string]string{
			"sources.list.d/a-vendor.list":  "deb http://vendor.example/php bookworm main\n",
			"sources.list.d/debian.sources": debianSources,
		},
		from: "sources.list.d/debian.sources",
		want: "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: " + keyring + "\n",
	}, {
		name: "files apt does not read are ignored",
		files: map[string]string{
			"sources.list.d/old.sources.disabled": "Types: deb\nURIs: http://old.example/debian\nSuites: bookworm\nComponents: main\n",
			"sources.list.d/mirror.list":          "deb http://mirror.example/debian bookworm main\n",
		},
		from: "sources.list.d/mirror.list",
		want: "deb http://mirror.example/debian bookworm-backports main\n",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			etc := aptDir(t, c.files)
			out, stderr, code := setupFunc(t, "backports_entry", etc, "bookworm")
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if want := header(etc, c.from) + c.want; out != want {
				t.Fatalf("entry:\n%s\nwant:\n%s", out, want)
			}
		})
	}
}

// DRV-7: with no enabled bookworm main entry there is no mirror to use.
func TestSetupBackportsEntryWithoutMirror(t *testing.T) {
	cases := map[string]map[string]string{
		"no source files": {},
		"security only": {"sources.list.d/debian.sources": "Types: deb\nURIs: http://mirror.example/debian-security\n" +
			"Suites: bookworm-security\nComponents: main\n"},
		"another release":    {"sources.list": "deb http://mirror.example/debian trixie main\n"},
		"commented out":      {"sources.list": "#deb http://mirror.example/debian bookworm main\n"},
		"deb-src only":       {"sources.list.d/d.sources": "Types: deb-src\nURIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\n"},
		"contrib only":       {"sources.list": "deb http://mirror.example/debian bookworm contrib\n"},
		"disabled paragraph": {"sources.list.d/d.sources": "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\nEnabled: No\n"},
		"paragraph, no URIs": {"sources.list.d/d.sources": "Types: deb\nSuites: bookworm\nComponents: main\n"},
		"not a sources file": {"sources.list.d/debian.sources.bak": debianSources},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			etc := aptDir(t, files)
			out, _, code := setupFunc(t, "backports_entry", etc, "bookworm")
			if code == 0 || out != "" {
				t.Fatalf("exit %d, output %q: want a failure and no entry", code, out)
			}
		})
	}
}

// Idempotence: an existing backports entry is found in either format, and
// only when apt would use it.
func TestSetupDetectsExistingBackports(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		has   bool
	}{
		{"one-line file", map[string]string{"sources.list.d/bookworm-backports.list": "deb http://mirror.example/debian bookworm-backports main\n"}, true},
		{"in sources.list with options", map[string]string{"sources.list": "deb [signed-by=" + keyring + "] http://mirror.example/debian bookworm-backports main contrib\n"}, true},
		{"deb822 beside the other suites", map[string]string{"sources.list.d/debian.sources": strings.Replace(debianSources, "bookworm bookworm-updates", "bookworm bookworm-updates bookworm-backports", 1)}, true},
		{"deb822 file of its own", map[string]string{"sources.list.d/bookworm-backports.sources": "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm-backports\nComponents: main\n"}, true},
		{"none", map[string]string{"sources.list.d/debian.sources": debianSources}, false},
		{"commented out", map[string]string{"sources.list": "# deb http://mirror.example/debian bookworm-backports main\n"}, false},
		{"disabled", map[string]string{"sources.list.d/b.sources": "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm-backports\nComponents: main\nEnabled: no\n"}, false},
		{"deb-src only", map[string]string{"sources.list": "deb-src http://mirror.example/debian bookworm-backports main\n"}, false},
		{"a file apt does not read", map[string]string{"sources.list.d/bookworm-backports.list.disabled": "deb http://mirror.example/debian bookworm-backports main\n"}, false},
		{"a suite with a longer name", map[string]string{"sources.list": "deb http://mirror.example/debian bookworm-backports-sloppy main\n"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			etc := aptDir(t, c.files)
			_, stderr, code := setupFunc(t, "apt_has_suite", etc, "bookworm-backports")
			if got := code == 0; got != c.has {
				t.Fatalf("has bookworm-backports = %v (exit %d, stderr %q), want %v", got, code, stderr, c.has)
			}
		})
	}
}

// add_backports_source writes the entry once, in the source's format; run
// again it finds it and changes nothing. apt itself (when present) reads
// the result as bookworm-backports on the machine's mirror.
func TestSetupAddsBackportsOnce(t *testing.T) {
	cases := []struct {
		name, from, content, wrote string
	}{
		{"deb822", "sources.list.d/debian.sources", debianSources, "sources.list.d/bookworm-backports.sources"},
		{"one-line", "sources.list", "deb http://mirror.example/debian bookworm main\n", "sources.list.d/bookworm-backports.list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			etc := aptDir(t, map[string]string{c.from: c.content})
			entry, _, _ := setupFunc(t, "backports_entry", etc, "bookworm")
			out, stderr, code := setupFunc(t, "add_backports_source", etc)
			if code != 0 {
				t.Fatalf("first run: exit %d, stderr %q", code, stderr)
			}
			path := filepath.Join(etc, c.wrote)
			if !strings.Contains(out, "adding apt source "+path) {
				t.Errorf("first run did not say what it wrote:\n%s", out)
			}
			first, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("first run wrote no %s: %v", c.wrote, err)
			}
			if entry == "" || string(first) != entry {
				t.Errorf("wrote %q, want the entry %q", first, entry)
			}
			out, stderr, code = setupFunc(t, "add_backports_source", etc)
			if code != 0 || !strings.Contains(out, "apt source bookworm-backports already present") {
				t.Fatalf("second run: exit %d, stdout %q, stderr %q", code, out, stderr)
			}
			second, _ := os.ReadFile(path)
			if !bytes.Equal(first, second) {
				t.Errorf("second run changed %s:\n%s\nto\n%s", c.wrote, first, second)
			}
			entries, _ := os.ReadDir(filepath.Join(etc, "sources.list.d"))
			if len(entries) > 2 {
				t.Errorf("sources.list.d holds %d files after two runs, want at most 2", len(entries))
			}
			aptReads(t, etc, "http://mirror.example/debian bookworm-backports main")
		})
	}
}

// aptReads checks with apt-get that the sources under etc parse and list
// want ("SITE SUITE COMPONENT"); apt needs no network for it.
func aptReads(t *testing.T, etc, want string) {
	t.Helper()
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Logf("SKIP the apt-get parse check: %v", err)
		return
	}
	list := filepath.Join(etc, "sources.list")
	if _, err := os.Stat(list); err != nil {
		list = os.DevNull
	}
	out, err := exec.Command("apt-get",
		"-o", "Dir::Etc::SourceList="+list,
		"-o", "Dir::Etc::SourceParts="+filepath.Join(etc, "sources.list.d"),
		"-o", "Dir::State::Lists="+t.TempDir(),
		"indextargets", "--no-release-info", "--format", "$(SITE) $(RELEASE) $(COMPONENT)").CombinedOutput()
	if err != nil {
		t.Fatalf("apt-get cannot read the sources: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), want+"\n") {
		t.Fatalf("apt-get lists no %q:\n%s", want, out)
	}
}

// No mirror: a clear error that says where it looked and what to do, and
// nothing written. A file in the way is never overwritten.
func TestSetupAddBackportsRefuses(t *testing.T) {
	t.Run("no mirror", func(t *testing.T) {
		etc := aptDir(t, map[string]string{"sources.list": "deb http://mirror.example/debian-security bookworm-security main\n"})
		_, stderr, code := setupFunc(t, "add_backports_source", etc)
		if code == 0 {
			t.Fatal("succeeded without a mirror")
		}
		for _, want := range []string{"FAILED: no Debian mirror for bookworm", filepath.Join(etc, "sources.list"), "add the machine's mirror there"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("error lacks %q: %q", want, stderr)
			}
		}
		if entries, _ := os.ReadDir(filepath.Join(etc, "sources.list.d")); len(entries) != 0 {
			t.Errorf("wrote %d files without a mirror", len(entries))
		}
	})
	t.Run("file in the way", func(t *testing.T) {
		const disabled = "# deb http://mirror.example/debian bookworm-backports main\n"
		etc := aptDir(t, map[string]string{
			"sources.list":                           "deb http://mirror.example/debian bookworm main\n",
			"sources.list.d/bookworm-backports.list": disabled,
		})
		_, stderr, code := setupFunc(t, "add_backports_source", etc)
		if code == 0 || !strings.Contains(stderr, "bookworm-backports.list exists but holds no enabled bookworm-backports entry") {
			t.Fatalf("exit %d, stderr %q: want a refusal naming the file", code, stderr)
		}
		if got, _ := os.ReadFile(filepath.Join(etc, "sources.list.d/bookworm-backports.list")); string(got) != disabled {
			t.Errorf("the file in the way was changed to %q", got)
		}
	})
}
