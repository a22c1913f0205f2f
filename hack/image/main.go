// Command image builds kube-ipvs-proxy's container image without a container
// daemon or a registry: the proxier's static binary and the programs it runs
// (rootfs.go), taken from a Debian root, in one layer on an empty base,
// written as an OCI image archive that containerd, skopeo and podman load.
//
//	image -root DIR -bin FILE -packages FILE -version V -revision R -created UNIX -o ARCHIVE
//	image -root / -bin FILE -packages FILE -rootfs DIR   (the Dockerfile's build stage)
//	image -arch amd64,arm64 -root DIR-{arch} -bin FILE-{arch} ... -o ARCHIVE   (a multi-arch index)
//
// The node tests (e2e/node) build their images with it too: upstream
// kube-proxy on the same files (-name, -entrypoint, -iptables), and the
// pause, echo and CoreDNS images of one static binary each (-static).
//
// It uses go-containerregistry, the library behind crane, ko and kaniko:
// pinned in go.sum like every other dependency, it writes the same image on
// any machine with Go, where buildah or umoci would add a package, a storage
// driver and root to the build.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// repository is the image's name in deploy/ and in the archive.
const repository = "localhost/kube-ipvs-proxy"

// spec says which image to build; the defaults are the proxier's.
var spec = struct {
	name, entrypoint, iptables, programs, files, links, cmd string
	static                                                  bool
	archs                                                   []string
}{name: repository, entrypoint: entrypoint, archs: []string{runtime.GOARCH}}

func main() {
	root := flag.String("root", "/", "the Debian root the programs and libraries are taken from")
	bin := flag.String("bin", "", "the proxier's static binary")
	pkgs := flag.String("packages", "hack/image/packages", "the Debian packages the image takes files from, one per line")
	rootfsDir := flag.String("rootfs", "", "write the files into this directory instead of an image (the Dockerfile's way)")
	version := flag.String("version", "", "the version: a tag of the archive and the image's version label")
	revision := flag.String("revision", "", "the git commit, for the revision label")
	created := flag.Int64("created", 0, "the creation time, seconds since 1970 (the commit's time, so that a build is reproducible)")
	tags := flag.String("tags", "dev", "more tags, comma-separated, besides the version")
	out := flag.String("o", "", "the OCI image archive to write")
	flag.StringVar(&spec.name, "name", repository, "the image's name, without a tag")
	flag.StringVar(&spec.entrypoint, "entrypoint", entrypoint, "where -bin goes in the image; it is the entrypoint")
	flag.BoolVar(&spec.static, "static", false, "without iptables and kmod (a test image: -bin, and what -programs, -files and -links add)")
	flag.StringVar(&spec.iptables, "iptables", "", "nft or legacy: plain iptables names for that backend, for a program that does not pick one itself")
	flag.StringVar(&spec.programs, "programs", "", "more programs from the root, comma-separated (upstream kube-proxy runs ipset)")
	flag.StringVar(&spec.files, "files", "", "more files from the root, comma-separated, at the same paths (ipset reads /etc/protocols)")
	flag.StringVar(&spec.links, "links", "", "more symlinks, comma-separated PATH=TARGET (/bin/sh=/usr/bin/dash)")
	flag.StringVar(&spec.cmd, "cmd", "", "the image's default arguments, comma-separated (agnhost's: pause)")
	archs := flag.String("arch", runtime.GOARCH, "the architectures, comma-separated (amd64, arm64); with more than one, an index of an image each, {arch} in -root and -bin naming each one's")
	flag.Parse()
	spec.archs = strings.Split(*archs, ",")
	if err := run(*root, *bin, *pkgs, *rootfsDir, *version, *revision, *created, *tags, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(root, bin, pkgFile, rootfsDir, version, revision string, created int64, tags, out string) error {
	if bin == "" {
		return fmt.Errorf("-bin is required")
	}
	var packages []string
	if pkgFile != "" {
		var err error
		if packages, err = readPackages(pkgFile); err != nil {
			return err
		}
	}
	if rootfsDir != "" {
		if len(spec.archs) != 1 {
			return fmt.Errorf("-rootfs takes one -arch")
		}
		files, err := rootfs(root, bin, packages, spec.archs[0])
		if err != nil {
			return err
		}
		return writeDir(rootfsDir, files)
	}
	if out == "" || version == "" {
		return fmt.Errorf("-o and -version are required to write an image")
	}
	t := time.Unix(created, 0).UTC()
	var images []platformImage
	size, count := 0, 0
	for _, arch := range spec.archs {
		files, err := rootfs(strings.ReplaceAll(root, "{arch}", arch), strings.ReplaceAll(bin, "{arch}", arch), packages, arch)
		if err != nil {
			return fmt.Errorf("%s: %w", arch, err)
		}
		img, err := image(files, spec.entrypoint, arch, t, labels(version, revision, t))
		if err != nil {
			return err
		}
		images = append(images, platformImage{arch, img})
		for _, f := range files {
			size += len(f.data)
		}
		count += len(files)
	}
	names := []string{version}
	for _, tag := range strings.Split(tags, ",") {
		if tag = strings.TrimSpace(tag); tag != "" && !slices.Contains(names, tag) {
			names = append(names, tag)
		}
	}
	if err := writeArchive(out, images, names, t); err != nil {
		return err
	}
	fi, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s:%s (%s), %d files, %.1f MB unpacked, %.1f MB archive\n",
		out, spec.name, strings.Join(names, ","), strings.Join(spec.archs, ", "), count, float64(size)/1e6, float64(fi.Size())/1e6)
	return nil
}

// platformImage is one architecture's image.
type platformImage struct {
	arch string
	img  v1.Image
}

// readPackages reads one package name per line; # starts a comment.
func readPackages(name string) ([]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l, _, _ = strings.Cut(l, "#")
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// labels are the image's org.opencontainers.image annotations, the same
// keys as the Dockerfile's LABEL lines.
func labels(version, revision string, created time.Time) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "kube-ipvs-proxy",
		"org.opencontainers.image.description": "An IPVS Kubernetes service proxy, a drop-in for kube-proxy --proxy-mode=ipvs",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	if spec.name != repository { // a test image: only its name and version
		l["org.opencontainers.image.title"] = path.Base(spec.name)
		l["org.opencontainers.image.description"] = "a kube-ipvs-proxy test image (e2e/node)"
	}
	return l
}

// image is files as one layer on an empty base, run as entry, for arch.
func image(files []file, entry, arch string, created time.Time, labels map[string]string) (v1.Image, error) {
	data, err := layerTar(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "hack/image", Comment: path.Base(entry) + " and the programs it runs"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = []string{entry}
	if spec.cmd != "" {
		cf.Config.Cmd = strings.Split(spec.cmd, ",")
	}
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin"}
	cf.Config.Labels = labels
	return mutate.ConfigFile(img, cf)
}

// layerTar is the layer: files and their parent directories, sorted, owned
// by root, all at one time.
func layerTar(files []file, mtime time.Time) ([]byte, error) {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.path); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	type entry struct {
		name string
		hdr  tar.Header
		data []byte
	}
	var entries []entry
	for d := range dirs {
		entries = append(entries, entry{d, tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}, nil})
	}
	for _, f := range files {
		if f.link != "" {
			entries = append(entries, entry{f.path, tar.Header{Typeflag: tar.TypeSymlink, Linkname: f.link, Mode: 0o777}, nil})
			continue
		}
		entries = append(entries, entry{f.path, tar.Header{Typeflag: tar.TypeReg, Mode: int64(f.mode.Perm()), Size: int64(len(f.data))}, f.data})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		h.Name = strings.TrimPrefix(e.name, "/")
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.ModTime, h.Format = mtime, tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeArchive writes the images as an OCI image layout in a tar, once per
// name: org.opencontainers.image.ref.name is the tag (skopeo's and podman's
// way), io.containerd.image.name the full name `ctr images import` gives
// it. One image is written as itself; several as an index of them, each
// with its platform, which a runtime picks its own from.
func writeArchive(out string, images []platformImage, names []string, mtime time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	var index v1.ImageIndex
	if len(images) > 1 {
		index = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, pi := range images {
			index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: pi.img,
				Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: pi.arch}}})
		}
	}
	for _, n := range names {
		names := layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": n,
			"io.containerd.image.name":          spec.name + ":" + n,
		})
		var err error
		if index != nil {
			err = p.AppendIndex(index, names)
		} else {
			err = p.AppendImage(images[0].img, names)
		}
		if err != nil {
			return err
		}
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp, mtime); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// tarDir writes dir's files, sorted, into the tar file out.
func tarDir(dir, out string, mtime time.Time) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// writeDir writes the files under dir, for a Dockerfile to COPY.
func writeDir(dir string, files []file) error {
	for _, f := range files {
		dst := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if f.link != "" {
			if err := os.Symlink(f.link, dst); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(dst, f.data, f.mode.Perm()); err != nil {
			return err
		}
		if err := os.Chmod(dst, f.mode.Perm()); err != nil {
			return err
		}
	}
	return nil
}
