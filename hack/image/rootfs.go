package main

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The image's files, at fixed paths whatever the layout of the root they are
// taken from: Debian's packages keep /lib and /bin apart, an installed
// bookworm merges them into /usr. So `make image` (packages unpacked) and the
// Dockerfile (packages installed) lay out the same files.
const entrypoint = "/usr/local/bin/kube-ipvs-proxy"

// platform is what the files of one architecture's image differ by:
// Debian's multiarch directory, and the ELF machine its programs are for.
type platform struct {
	triplet string
	machine elf.Machine
}

// platforms are the architectures an image can be built for, by GOARCH.
var platforms = map[string]platform{
	"amd64": {"x86_64-linux-gnu", elf.EM_X86_64},
	"arm64": {"aarch64-linux-gnu", elf.EM_AARCH64},
}

// libDir holds every library and the loader; xtablesDir the iptables
// extensions, a path built into libxtables.
func (p platform) libDir() string     { return "/lib/" + p.triplet }
func (p platform) xtablesDir() string { return "/usr/lib/" + p.triplet + "/xtables" }

// libSearch is where a shared library is looked for in the root, in order.
func (p platform) libSearch() []string {
	return []string{"lib/" + p.triplet, "usr/lib/" + p.triplet, "lib64", "lib", "usr/lib"}
}

// programs are the executables the proxier runs, by their place in the
// image. Both iptables backends are there: the proxier picks the one that
// holds the node's rules (package iptables), as upstream's images do.
var programs = map[string][]string{
	"/usr/sbin/xtables-nft-multi":    {"usr/sbin", "sbin"},
	"/usr/sbin/xtables-legacy-multi": {"usr/sbin", "sbin"},
	"/usr/bin/kmod":                  {"usr/bin", "bin"}, // modprobe, for the modules IPVS mode needs
}

// links are the names the programs answer to. There is no plain
// iptables-restore: without it the proxier knows to pick a backend.
var links = func() map[string]string {
	l := map[string]string{"/usr/sbin/modprobe": "../bin/kmod"}
	for _, mode := range []string{"nft", "legacy"} {
		for _, fam := range []string{"iptables", "ip6tables"} {
			for _, cmd := range []string{"save", "restore"} {
				l[fmt.Sprintf("/usr/sbin/%s-%s-%s", fam, mode, cmd)] = "xtables-" + mode + "-multi"
			}
		}
	}
	return l
}()

// file is one entry of the image's only layer.
type file struct {
	path string // absolute, in the image
	mode os.FileMode
	data []byte // a regular file's content
	link string // a symlink's target
}

// rootfs collects the image's files from root: the binary, iptables with
// both backends and kmod (unless spec.static), the programs, files and links
// spec adds, every library the programs load (followed through DT_NEEDED,
// and the iptables extensions, which are loaded by name at run time), and
// each package's copyright file. A library that cannot be found is an
// error, so a package missing from the list fails the build rather than
// the node, and so is a program of another architecture than arch.
func rootfs(root, binary string, packages []string, arch string) ([]file, error) {
	p, ok := platforms[arch]
	if !ok {
		return nil, fmt.Errorf("no platform %q: want amd64 or arm64", arch)
	}
	b := &builder{root: root, files: map[string]file{}, platform: p}
	if err := b.add(spec.entrypoint, binary); err != nil {
		return nil, err
	}
	if err := b.checkMachine(binary); err != nil {
		return nil, err
	}
	if !spec.static {
		if err := b.addIptables(); err != nil {
			return nil, err
		}
	}
	if err := b.addExtras(); err != nil {
		return nil, err
	}
	for _, p := range packages {
		src := filepath.Join(root, "usr/share/doc", p, "copyright")
		if err := b.add(path.Join("/usr/share/doc", p, "copyright"), src); err != nil {
			return nil, fmt.Errorf("package %s: %w", p, err)
		}
	}
	return b.list(), nil
}

// addIptables adds the proxier's programs: both iptables backends with
// their extensions and names, and kmod.
func (b *builder) addIptables() error {
	for dst, dirs := range programs {
		src, err := b.find(path.Base(dst), dirs)
		if err != nil {
			return err
		}
		if err := b.addELF(dst, src); err != nil {
			return err
		}
	}
	exts, err := b.xtables()
	if err != nil {
		return err
	}
	for _, src := range exts {
		dst := path.Join(b.xtablesDir(), filepath.Base(src))
		if target, err := os.Readlink(src); err == nil {
			// An alias of another extension (libxt_NOTRACK.so → libxt_CT.so).
			b.files[dst] = file{path: dst, mode: os.ModeSymlink | 0o777, link: target}
			continue
		}
		if err := b.addELF(dst, src); err != nil {
			return err
		}
	}
	for name, target := range links {
		b.link(name, target)
	}
	if spec.iptables != "" {
		for _, fam := range []string{"iptables", "ip6tables"} {
			for _, cmd := range []string{"", "-save", "-restore"} {
				b.link("/usr/sbin/"+fam+cmd, "xtables-"+spec.iptables+"-multi")
			}
		}
	}
	return nil
}

// addExtras adds what spec asks for besides: programs (in /usr/bin, with
// their libraries), files at their own paths, and links.
func (b *builder) addExtras() error {
	list := func(s string) []string { return strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) }
	for _, name := range list(spec.programs) {
		src, err := b.find(name, []string{"usr/sbin", "sbin", "usr/bin", "bin"})
		if err != nil {
			return err
		}
		if err := b.addELF(path.Join("/usr/bin", name), src); err != nil {
			return err
		}
	}
	for _, name := range list(spec.files) {
		if err := b.add(path.Clean("/"+name), filepath.Join(b.root, name)); err != nil {
			return err
		}
	}
	for _, l := range list(spec.links) {
		name, target, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("-links: %q is not PATH=TARGET", l)
		}
		b.link(name, target)
	}
	return nil
}

// link adds a symlink.
func (b *builder) link(name, target string) {
	b.files[name] = file{path: name, mode: os.ModeSymlink | 0o777, link: target}
}

// list is the files, sorted by path.
func (b *builder) list() []file {
	out := make([]file, 0, len(b.files))
	for _, f := range b.files {
		out = append(out, f)
	}
	slices.SortFunc(out, func(x, y file) int { return strings.Compare(x.path, y.path) })
	return out
}

type builder struct {
	root  string
	files map[string]file
	platform
}

// checkMachine refuses a program built for another architecture: an image
// of mixed ones would fail only on the node. (A file that is no ELF, as a
// test's stand-in, is not checked.)
func (b *builder) checkMachine(src string) error {
	f, err := elf.Open(src)
	if err != nil {
		return nil
	}
	defer f.Close()
	if f.Machine != b.machine {
		return fmt.Errorf("%s is for %s, not %s", src, f.Machine, b.machine)
	}
	return nil
}

// find is the first of dirs under the root that holds name, symlinks
// followed inside the root.
func (b *builder) find(name string, dirs []string) (string, error) {
	for _, d := range dirs {
		p, err := b.resolve(path.Join(d, name))
		if err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found under %s in %s", name, strings.Join(dirs, ", "), b.root)
}

// resolve follows rel's last symlinks as if root were /, and returns the
// host path of the regular file it names. (A symlinked directory on the way,
// as merged /usr has, is followed by the system; the packages unpacked for
// `make image` have none.)
func (b *builder) resolve(rel string) (string, error) {
	for range 40 {
		full := filepath.Join(b.root, rel)
		fi, err := os.Lstat(full)
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if !fi.Mode().IsRegular() {
				return "", fmt.Errorf("%s is not a regular file", full)
			}
			return full, nil
		}
		target, err := os.Readlink(full)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			rel = target
		} else {
			rel = path.Join(path.Dir(rel), target)
		}
	}
	return "", fmt.Errorf("%s: too many symlinks", rel)
}

// add puts the host file src into the image at dst, with its mode.
func (b *builder) add(dst, src string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	b.files[dst] = file{path: dst, mode: fi.Mode().Perm(), data: data}
	return nil
}

// addELF adds an executable or library with its interpreter and every
// library it needs, each library at libDir under its soname.
func (b *builder) addELF(dst, src string) error {
	if _, done := b.files[dst]; done {
		return nil
	}
	if err := b.add(dst, src); err != nil {
		return err
	}
	f, err := elf.Open(src)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer f.Close()
	if f.Machine != b.machine {
		return fmt.Errorf("%s is for %s, not %s", src, f.Machine, b.machine)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		interp := make([]byte, p.Filesz)
		if _, err := p.ReadAt(interp, 0); err != nil {
			return fmt.Errorf("%s: interpreter: %w", src, err)
		}
		// The loader lives in libDir, where libc's DT_NEEDED finds it too,
		// and the interpreter path links to it, as on Debian.
		name := strings.TrimRight(string(interp), "\x00")
		isrc, err := b.resolve(strings.TrimPrefix(name, "/"))
		if err != nil {
			return fmt.Errorf("%s: interpreter: %w", src, err)
		}
		loader := path.Join(b.libDir(), path.Base(name))
		if err := b.addELF(loader, isrc); err != nil {
			return err
		}
		if name != loader {
			target, _ := filepath.Rel(path.Dir(name), loader)
			b.files[name] = file{path: name, mode: os.ModeSymlink | 0o777, link: target}
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	for _, lib := range needed {
		lsrc, err := b.find(lib, b.libSearch())
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", dst, lib, err)
		}
		if err := b.addELF(path.Join(b.libDir(), lib), lsrc); err != nil {
			return err
		}
	}
	return nil
}

// xtables lists the iptables extensions in the root.
func (b *builder) xtables() ([]string, error) {
	for _, d := range []string{"usr/lib/" + b.triplet + "/xtables", "lib/" + b.triplet + "/xtables"} {
		m, _ := filepath.Glob(filepath.Join(b.root, d, "*.so"))
		var out []string
		for _, p := range m {
			// Kept: regular files, and aliases of one in the same place.
			if t, err := os.Readlink(p); err == nil && strings.Contains(t, "/") {
				continue
			}
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				out = append(out, p)
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("no iptables extensions (xtables/*.so) in %s", b.root)
}
