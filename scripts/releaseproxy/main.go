// Command releaseproxy writes a module proxy holding modules of this
// repository's working tree at a release version, in the layout that the go
// command reads with GOPROXY=file://DIR:
//
//	DIR/<module path>/@v/list
//	DIR/<module path>/@v/<version>.info
//	DIR/<module path>/@v/<version>.mod
//	DIR/<module path>/@v/<version>.zip
//
// with module paths and versions case-escaped as the proxy protocol asks
// (golang.org/x/mod/module's EscapePath and EscapeVersion). It is the first
// half of scripts/release-rehearsal.sh, which then installs every module
// from that directory as a user would.
//
// Usage, from the repository's root:
//
//	go run ./scripts/releaseproxy -version v0.1.0 -out DIR . interop/otel ...
//
// Each argument is a module's directory, relative to -repo (default: the
// current directory). The zip of a module holds its files as golang.org/x/mod/zip
// makes them, without the directories of nested modules; inside a Git work
// tree, only the files Git tracks or would add (not those .gitignore names),
// so that the zip holds what a tag of the working tree would. The .mod file
// is the module's go.mod as it is, replace directives included: it is what
// the proxy serves once the module is tagged, and the go command ignores the
// replace directives of every module but the main one.
//
// Before writing anything, releaseproxy checks every go.mod under -repo: a
// requirement on a module of this repository must name -version, and a
// module's path must be the repository's module path followed by its
// directory (the tag interop/otel/v0.1.0 names the module in interop/otel).
// It exits 1, naming each go.mod that breaks one of these rules.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "the repository's root directory")
	version := flag.String("version", "", "the release version, e.g. v0.1.0")
	out := flag.String("out", "", "the proxy directory to write (created if missing)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: releaseproxy -version vX.Y.Z -out DIR [-repo DIR] module-dir...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*repo, *version, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "releaseproxy:", err)
		os.Exit(1)
	}
}

func run(repo, version, out string, dirs []string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Prerelease(version) != "" {
		return fmt.Errorf("version %q is not a release version such as v0.1.0", version)
	}
	rootPath, err := modulePath(filepath.Join(repo, "go.mod"))
	if err != nil {
		return err
	}
	if err := checkRequirements(repo, rootPath, version); err != nil {
		return err
	}
	files, err := gitFiles(repo)
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		dir = path.Clean(filepath.ToSlash(dir))
		line, err := writeModule(repo, dir, rootPath, version, out, files)
		if err != nil {
			return err
		}
		fmt.Println(line)
	}
	return nil
}

// modulePath reads the module path of a go.mod file.
func modulePath(gomod string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	p := modfile.ModulePath(data)
	if p == "" {
		return "", fmt.Errorf("%s: no module line", gomod)
	}
	return p, nil
}

// checkRequirements checks every go.mod under repo (outside testdata and the
// directories the go command ignores): its module path is rootPath followed
// by its directory, and each requirement on a module of this repository
// names version.
func checkRequirements(repo, rootPath, version string) error {
	var problems []string
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != repo && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		rel, err := filepath.Rel(repo, filepath.Dir(p))
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := modfile.ParseLax(p, data, nil)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(filepath.Join(rel, "go.mod"))
		want := rootPath
		if rel != "." {
			want = rootPath + "/" + filepath.ToSlash(rel)
		}
		if f.Module == nil || f.Module.Mod.Path != want {
			problems = append(problems, fmt.Sprintf("%s: module path is not %s", name, want))
		}
		for _, r := range f.Require {
			if ours(r.Mod.Path, rootPath) && r.Mod.Version != version {
				problems = append(problems, fmt.Sprintf("%s: requires %s %s, not the release version %s", name, r.Mod.Path, r.Mod.Version, version))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// ours reports whether p is rootPath or a module below it.
func ours(p, rootPath string) bool {
	return p == rootPath || strings.HasPrefix(p, rootPath+"/")
}

// gitFiles returns the files of repo's work tree that Git tracks or would
// add, as slash-separated paths relative to repo, or nil when repo is not a
// Git work tree (every file then goes into the zips, as CreateFromDir puts
// them).
func gitFiles(repo string) (map[string]bool, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, nil
	}
	top, err := exec.Command("git", "-C", repo, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return nil, nil // not a work tree
	}
	abs, err := filepath.Abs(repo)
	if err != nil {
		return nil, err
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	if filepath.Clean(strings.TrimSpace(string(top))) != abs {
		return nil, fmt.Errorf("%s is inside the Git work tree %s, not its root", repo, strings.TrimSpace(string(top)))
	}
	cmd := exec.Command("git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Stderr = os.Stderr
	listed, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %v", err)
	}
	files := make(map[string]bool)
	for _, name := range bytes.Split(listed, []byte{0}) {
		if len(name) > 0 {
			files[string(name)] = true
		}
	}
	return files, nil
}

// writeModule writes the module in repo/dir to the proxy at out and returns
// a line that names it, its tag and its size.
func writeModule(repo, dir, rootPath, version, out string, known map[string]bool) (string, error) {
	modDir := filepath.Join(repo, filepath.FromSlash(dir))
	gomod, err := os.ReadFile(filepath.Join(modDir, "go.mod"))
	if err != nil {
		return "", err
	}
	mv := module.Version{Path: modfile.ModulePath(gomod), Version: version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return "", err
	}
	tag := version
	if dir != "." {
		tag = dir + "/" + version
	}
	escPath, err := module.EscapePath(mv.Path)
	if err != nil {
		return "", err
	}
	escVersion, err := module.EscapeVersion(mv.Version)
	if err != nil {
		return "", err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", err
	}

	var zipped bytes.Buffer
	n := 0
	if known == nil {
		if err := modzip.CreateFromDir(&zipped, mv, modDir); err != nil {
			return "", err
		}
		n = -1
	} else {
		files, err := moduleFiles(repo, dir, known)
		if err != nil {
			return "", err
		}
		if err := modzip.Create(&zipped, mv, files); err != nil {
			return "", err
		}
		n = len(files)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{
		"list":               []byte(version + "\n"),
		escVersion + ".info": info,
		escVersion + ".mod":  gomod,
		escVersion + ".zip":  zipped.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	files := "every file"
	if n >= 0 {
		files = fmt.Sprintf("%d files", n)
	}
	return fmt.Sprintf("%s@%s (tag %s): %s, %d-byte zip", mv.Path, version, tag, files, zipped.Len()), nil
}

// moduleFiles lists the files of the module in repo/dir that Git knows,
// leaving out the directories of nested modules, as CreateFromDir does.
func moduleFiles(repo, dir string, known map[string]bool) ([]modzip.File, error) {
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	nested := make(map[string]bool) // directories below dir, relative to repo: is a module root
	isNested := func(d string) bool {
		v, ok := nested[d]
		if !ok {
			_, err := os.Lstat(filepath.Join(repo, filepath.FromSlash(d), "go.mod"))
			v = err == nil
			nested[d] = v
		}
		return v
	}
	var files []modzip.File
	for name := range known {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		inNested := false
		for d := path.Dir(name); d != "." && d+"/" != prefix; d = path.Dir(d) {
			if isNested(d) {
				inNested = true
				break
			}
		}
		if inNested {
			continue
		}
		full := filepath.Join(repo, filepath.FromSlash(name))
		fi, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			continue // symbolic links are left out of module zips
		}
		files = append(files, gitFile{slash: strings.TrimPrefix(name, prefix), full: full})
	}
	return files, nil
}

// gitFile is a file of the work tree, for modzip.Create.
type gitFile struct {
	slash string // path in the zip, relative to the module's root
	full  string // path on disk
}

func (f gitFile) Path() string                 { return f.slash }
func (f gitFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.full) }
func (f gitFile) Open() (io.ReadCloser, error) { return os.Open(f.full) }
