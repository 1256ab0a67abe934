package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// writeTree creates the files of tree (slash-separated path: contents) under
// a new temporary directory and returns it.
func writeTree(t *testing.T, tree map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range tree {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckRequirementsNamesEveryGoModOffTheRelease(t *testing.T) {
	repo := writeTree(t, map[string]string{
		"go.mod": "module example.com/Lib\n\ngo 1.22\n",
		"a/go.mod": "module example.com/Lib/a\n\ngo 1.22\n\n" +
			"require example.com/Lib v0.0.0-00010101000000-000000000000\n\n" +
			"replace example.com/Lib => ../\n",
		"b/go.mod":          "module example.com/Lib/b\n\ngo 1.22\n\nrequire (\n\texample.com/Lib v0.2.0\n\texample.com/Lib/a v0.2.0\n\texample.com/Library v0.0.1\n)\n",
		"c/go.mod":          "module example.com/Other\n\ngo 1.22\n",
		"d/testdata/go.mod": "module whatever\n\ngo 1.22\n\nrequire example.com/Lib v0.0.1\n",
	})
	err := checkRequirements(repo, "example.com/Lib", "v0.2.0")
	if err == nil {
		t.Fatal("checkRequirements accepted a placeholder requirement and a wrong module path")
	}
	got := strings.Split(err.Error(), "\n")
	sort.Strings(got)
	want := []string{
		"a/go.mod: requires example.com/Lib v0.0.0-00010101000000-000000000000, not the release version v0.2.0",
		"c/go.mod: module path is not example.com/Lib/c",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("checkRequirements reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestModuleZipLeavesOutNestedModulesAndUnknownFiles(t *testing.T) {
	repo := writeTree(t, map[string]string{
		"go.mod":              "module example.com/Lib\n\ngo 1.22\n",
		"lib.go":              "package lib\n",
		"internal/x/x.go":     "package x\n",
		"sub/go.mod":          "module example.com/Lib/sub\n\ngo 1.22\n\nrequire example.com/Lib v0.2.0\n\nreplace example.com/Lib => ../\n",
		"sub/sub.go":          "package sub\n",
		"sub/deeper/d.go":     "package deeper\n",
		"sub/inner/go.mod":    "module example.com/Lib/sub/inner\n\ngo 1.22\n",
		"sub/inner/i.go":      "package inner\n",
		"lib.test":            "a build output that .gitignore names",
		"tools/tool/go.mod":   "module example.com/Lib/tools/tool\n\ngo 1.22\n",
		"tools/tool/tool.go":  "package main\n",
		"tools/tool/tool.txt": "",
	})
	known := make(map[string]bool)
	for _, name := range []string{"go.mod", "lib.go", "internal/x/x.go", "sub/go.mod", "sub/sub.go", "sub/deeper/d.go",
		"sub/inner/go.mod", "sub/inner/i.go", "tools/tool/go.mod", "tools/tool/tool.go", "tools/tool/tool.txt", "deleted.go"} {
		known[name] = true
	}
	out := t.TempDir()
	zipContents := func(escPath string) []string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(escPath), "@v", "v0.2.0.zip"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range r.File {
			names = append(names, f.Name)
		}
		sort.Strings(names)
		return names
	}

	for _, dir := range []string{".", "sub"} {
		if _, err := writeModule(repo, dir, "example.com/Lib", "v0.2.0", out, known); err != nil {
			t.Fatal(err)
		}
	}
	// Module paths are case-escaped in the proxy's directories
	// (example.com/!lib), not inside the zips.
	if got, want := strings.Join(zipContents("example.com/!lib"), " "),
		"example.com/Lib@v0.2.0/go.mod example.com/Lib@v0.2.0/internal/x/x.go example.com/Lib@v0.2.0/lib.go"; got != want {
		t.Errorf("root module's zip holds\n%s\nwant\n%s", got, want)
	}
	if got, want := strings.Join(zipContents("example.com/!lib/sub"), " "),
		"example.com/Lib/sub@v0.2.0/deeper/d.go example.com/Lib/sub@v0.2.0/go.mod example.com/Lib/sub@v0.2.0/sub.go"; got != want {
		t.Errorf("sub's zip holds\n%s\nwant\n%s", got, want)
	}

	vdir := filepath.Join(out, "example.com", "!lib", "sub", "@v")
	for name, want := range map[string]string{
		"list": "v0.2.0\n",
		// The go.mod as it is: the replace directive stays, as in a tag.
		"v0.2.0.mod": "module example.com/Lib/sub\n\ngo 1.22\n\nrequire example.com/Lib v0.2.0\n\nreplace example.com/Lib => ../\n",
	} {
		got, err := os.ReadFile(filepath.Join(vdir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is %q, want %q", name, got, want)
		}
	}
	info, err := os.ReadFile(filepath.Join(vdir, "v0.2.0.info"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(info), `{"Version":"v0.2.0","Time":"`) {
		t.Errorf("v0.2.0.info is %s, want the version and a time", info)
	}
}
