package main

import (
	"archive/tar"
	"debug/elf"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The Dockerfile builds what `make image` builds: the same tool and package
// list make the files, and the image's entrypoint, PATH and labels are the
// ones image() sets.
func TestDockerfileAgreesWithTheTool(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Instructions, continuation lines joined.
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(b), " ")
	var runs, labelLines []string
	var entry, env string
	for _, l := range strings.Split(text, "\n") {
		instr, rest, _ := strings.Cut(strings.TrimSpace(l), " ")
		switch instr {
		case "RUN":
			runs = append(runs, rest)
		case "LABEL":
			labelLines = append(labelLines, rest)
		case "ENTRYPOINT":
			entry = rest
		case "ENV":
			env = rest
		}
	}
	var ep []string
	if err := json.Unmarshal([]byte(entry), &ep); err != nil || !slices.Equal(ep, []string{entrypoint}) {
		t.Errorf("Dockerfile ENTRYPOINT %s, want [%q] (%v)", entry, entrypoint, err)
	}
	img, err := image([]file{{path: entrypoint, mode: 0o755, data: []byte("x")}}, entrypoint, "amd64", time.Unix(0, 0), labels("v", "r", time.Unix(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, ep) || !slices.Equal(cf.Config.Env, []string{env}) {
		t.Errorf("image entrypoint %v env %v; Dockerfile %v %q", cf.Config.Entrypoint, cf.Config.Env, ep, env)
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`([a-z.]+)="([^"]*)"`).FindAllStringSubmatch(strings.Join(labelLines, " "), -1) {
		got[m[1]] = m[2]
	}
	want := labels("${VERSION}", "${REVISION}", time.Unix(0, 0))
	want["org.opencontainers.image.created"] = "${CREATED}"
	if !maps.Equal(got, want) {
		t.Errorf("Dockerfile labels %v, want %v", got, want)
	}
	tool := false
	for _, r := range runs {
		tool = tool || strings.Contains(r, "go run ./hack/image -root / ") && strings.Contains(r, "-packages hack/image/packages -rootfs /out")
	}
	if !tool {
		t.Errorf("no RUN of hack/image on the installed root in %q", runs)
	}
}

// From this machine's root (Debian bookworm with iptables and kmod, as
// make deps installs them, merged /usr as in the Dockerfile's stage), the
// image gets both iptables backends and every library each program loads.
func TestRootfsHasEveryLibraryItsProgramsNeed(t *testing.T) {
	packages, err := readPackages("packages")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/usr/sbin/xtables-legacy-multi"); err != nil {
		t.Skip("iptables is not installed here (make deps installs it)")
	}
	here := platforms[runtime.GOARCH]
	if _, err := os.Stat("/usr/lib/" + here.triplet); err != nil {
		t.Skipf("no %s libraries in this machine's root: the test binary is %s, the root another's (user-mode emulation)", here.triplet, runtime.GOARCH)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	files, err := rootfs("/", self, packages, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]file{}
	for _, f := range files {
		byPath[f.path] = f
	}
	loaders := map[string]string{"amd64": "/lib64/ld-linux-x86-64.so.2", "arm64": "/lib/ld-linux-aarch64.so.1"}
	for _, p := range []string{entrypoint, "/usr/sbin/xtables-nft-multi", "/usr/sbin/iptables-legacy-restore", "/usr/sbin/ip6tables-nft-save",
		"/usr/sbin/modprobe", loaders[runtime.GOARCH], here.xtablesDir() + "/libxt_set.so", here.xtablesDir() + "/libxt_MASQUERADE.so", "/usr/share/doc/iptables/copyright"} {
		if _, ok := byPath[p]; !ok {
			t.Errorf("no %s in the image", p)
		}
	}
	if _, ok := byPath["/usr/sbin/iptables-restore"]; ok {
		t.Error("a plain iptables-restore in the image: the proxier would not pick a backend")
	}
	elfs := 0
	for _, f := range files {
		if f.link != "" {
			target := f.link
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(f.path), target)
			}
			if _, ok := byPath[target]; !ok {
				t.Errorf("%s links to %s, not in the image", f.path, target)
			}
			continue
		}
		if f.path == entrypoint || !strings.HasPrefix(string(f.data), "\x7fELF") {
			continue
		}
		elfs++
		tmp := filepath.Join(t.TempDir(), "elf")
		if err := os.WriteFile(tmp, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		e, err := elf.Open(tmp)
		if err != nil {
			t.Fatal(err)
		}
		needed, _ := e.ImportedLibraries()
		e.Close()
		for _, n := range needed {
			if _, ok := byPath[path.Join(here.libDir(), n)]; !ok {
				t.Errorf("%s needs %s, not in %s", f.path, n, here.libDir())
			}
		}
	}
	if elfs < 10 {
		t.Errorf("only %d programs and libraries", elfs)
	}
}

// The archive is an OCI layout holding the image once per name, with the
// names containerd and skopeo read.
func TestArchiveNamesTheImage(t *testing.T) {
	files := []file{{path: entrypoint, mode: 0o755, data: []byte("binary")}, {path: "/usr/sbin/modprobe", link: "../bin/kmod", mode: os.ModeSymlink | 0o777}}
	created := time.Unix(1700000000, 0).UTC()
	img, err := image(files, entrypoint, "amd64", created, labels("v1.2.3", "abc", created))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "image.tar")
	if err := writeArchive(out, []platformImage{{"amd64", img}}, []string{"v1.2.3", "dev"}, created); err != nil {
		t.Fatal(err)
	}
	idx, m := readArchive(t, out)
	var names []string
	for _, d := range m.Manifests {
		names = append(names, d.Annotations["org.opencontainers.image.ref.name"]+" "+d.Annotations["io.containerd.image.name"])
	}
	want := []string{"v1.2.3 " + repository + ":v1.2.3", "dev " + repository + ":dev"}
	if !slices.Equal(names, want) {
		t.Fatalf("names %q, want %q", names, want)
	}
	got, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" || !cf.Created.Time.Equal(created) {
		t.Errorf("labels %v created %v", cf.Config.Labels, cf.Created)
	}
	again := filepath.Join(dir, "again.tar")
	if err := writeArchive(again, []platformImage{{"amd64", img}}, []string{"v1.2.3", "dev"}, created); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if string(a) != string(b) {
		t.Error("the same image written twice differs")
	}
}

// readArchive unpacks an OCI archive and reads its index.
func readArchive(t *testing.T, archive string) (v1.ImageIndex, *v1.IndexManifest) {
	t.Helper()
	unpacked := filepath.Join(t.TempDir(), "layout")
	if err := untar(archive, unpacked); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return idx, m
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
}

// A test image (-static, -name, -entrypoint) holds its binary alone, is
// named as a cluster expects it, and runs that binary.
func TestStaticImageHoldsItsBinaryAlone(t *testing.T) {
	saved := spec
	t.Cleanup(func() { spec = saved })
	spec.name, spec.entrypoint, spec.static, spec.cmd = "registry.k8s.io/pause", "/pause", true, "serve,--flag"
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "pause.tar")
	if err := run("", bin, "", "", "3.10", "", 0, "", out); err != nil {
		t.Fatal(err)
	}
	idx, m := readArchive(t, out)
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["io.containerd.image.name"] != "registry.k8s.io/pause:3.10" {
		t.Fatalf("manifests %+v, want one named registry.k8s.io/pause:3.10", m.Manifests)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/pause"}) || cf.Config.Labels["org.opencontainers.image.title"] != "pause" {
		t.Errorf("entrypoint %v, labels %v", cf.Config.Entrypoint, cf.Config.Labels)
	}
	if !slices.Equal(cf.Config.Cmd, []string{"serve", "--flag"}) {
		t.Errorf("cmd %q, want the -cmd arguments", cf.Config.Cmd)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"pause"}) {
		t.Errorf("layer holds %v, want only pause", names)
	}
}

// TestMultiArchArchiveIsAnIndexOfPlatforms: with several architectures,
// each name points to an index holding one image per platform, which a
// runtime picks its own from.
func TestMultiArchArchiveIsAnIndexOfPlatforms(t *testing.T) {
	created := time.Unix(1700000000, 0).UTC()
	var images []platformImage
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := image([]file{{path: entrypoint, mode: 0o755, data: []byte("binary for " + arch)}}, entrypoint, arch, created, labels("v1.2.3", "abc", created))
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, platformImage{arch, img})
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := writeArchive(out, images, []string{"v1.2.3"}, created); err != nil {
		t.Fatal(err)
	}
	top, m := readArchive(t, out)
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex ||
		m.Manifests[0].Annotations["io.containerd.image.name"] != repository+":v1.2.3" {
		t.Fatalf("archive holds %+v, want one index named %s:v1.2.3", m.Manifests, repository)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Platform.OS+"/"+d.Platform.Architecture+" "+cf.OS+"/"+cf.Architecture)
	}
	if want := []string{"linux/amd64 linux/amd64", "linux/arm64 linux/arm64"}; !slices.Equal(got, want) {
		t.Errorf("platforms (index, config) %q, want %q", got, want)
	}
}

// TestRootfsRefusesAnotherArchitecture: a binary of the host's
// architecture in an arm64 image fails the build.
func TestRootfsRefusesAnotherArchitecture(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	saved := spec
	t.Cleanup(func() { spec = saved })
	spec.static = true
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	if _, err := rootfs("/", self, nil, other); err == nil || !strings.Contains(err.Error(), "not EM_") {
		t.Errorf("a %s binary in a %s image: %v, want refused", runtime.GOARCH, other, err)
	}
}
