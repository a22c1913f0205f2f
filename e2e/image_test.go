//go:build e2e

package e2e

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// TestImageProgramsTheNode runs the proxier from `make image`'s archive: its
// files unpacked as a container runtime would, the entrypoint run with them
// as its root and the node's /proc, /sys, /dev, /run and /lib/modules bound
// in, as the DaemonSet mounts them. It must find its libraries, pick the
// iptables backend that holds the node's rules (the image has no plain
// iptables-restore), name its version, and program a Service that answers.
// Serial: it replaces the shared proxier.
func TestImageProgramsTheNode(t *testing.T) {
	archive := os.Getenv("KIP_IMAGE")
	if archive == "" {
		t.Skip("KIP_IMAGE unset: make e2e builds the image and sets it")
	}
	root, cfg := unpackImage(t, archive)
	if !slices.Equal(cfg.entrypoint, []string{"/usr/local/bin/kube-ipvs-proxy"}) {
		t.Fatalf("entrypoint %v", cfg.entrypoint)
	}
	for _, dir := range []string{"/proc", "/sys", "/dev", "/run", "/lib/modules", env.State} {
		bindInto(t, root, dir)
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}

	out, err := framework.Chrooted(root, cfg.env, cfg.entrypoint[0], "--version").CombinedOutput()
	if want := "kube-ipvs-proxy " + cfg.labels["org.opencontainers.image.version"] + "\n"; err != nil || string(out) != want || strings.Contains(string(out), "devel") {
		t.Errorf("--version in the image: %q (%v), want %q", out, err, want)
	}
	// The backend the node's own iptables (its alternatives) wrote the
	// shared proxier's rules with.
	v, err := exec.Command("iptables", "-V").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := "legacy"
	if strings.Contains(string(v), "nf_tables") {
		backend = "nft"
	}

	old := ourProxier(t)
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}
	replaceProxier(t, nil)
	// A chain emptied meanwhile: only the image's iptables, on the right
	// backend, can fill it again.
	want := chainRules(t, "KUBE-POSTROUTING")
	if len(want) == 0 {
		t.Fatal("no rules in KUBE-POSTROUTING to begin with")
	}
	if out, err := exec.Command("iptables", "-t", "nat", "-F", "KUBE-POSTROUTING").CombinedOutput(); err != nil {
		t.Fatalf("flush KUBE-POSTROUTING: %v: %s", err, out)
	}
	start := time.Now()
	p, err := framework.StartChrooted(env, "kube-ipvs-proxy-image", root, cfg.env, cfg.entrypoint[0], framework.OursArgs(env, proxierFlags...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() }) // the next test starts a shared one again
	if err := framework.WaitSynced(p, start, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := logLines(t, p, "iptables backend", `backend="`+backend+`"`); n != 1 {
		t.Errorf("%d log lines choosing the %s backend, want 1 (see %s)", n, backend, p.LogPath)
	}
	if n := logLines(t, p, `version="`+cfg.labels["org.opencontainers.image.version"]+`"`); n != 1 {
		t.Errorf("the log does not name the version %s", cfg.labels["org.opencontainers.image.version"])
	}

	eventually(t, "KUBE-POSTROUTING written again by the image's iptables", 30*time.Second, func() error {
		if got := chainRules(t, "KUBE-POSTROUTING"); !slices.Equal(got, want) {
			return fmt.Errorf("KUBE-POSTROUTING holds %q, want %q", got, want)
		}
		return nil
	})

	const ns = "image"
	mustNamespace(t, ns)
	a := mustPod(t, "image-a", "10.244.53.1", true)
	client := mustPod(t, "image-client", "10.244.53.100", false)
	svc, slice := webService(ns, "10.96.53.10", a)
	mustApply(t, svc, slice)
	waitAnswerSet(t, client.HTTP, ap("10.96.53.10:80"), "image-a", 2, 30*time.Second)
	if done, err := p.Exited(); done {
		t.Fatalf("the image's proxier exited: %v", err)
	}
}

// imageConfig is what the tests read of an image's configuration.
type imageConfig struct {
	entrypoint, env []string
	labels          map[string]string
}

// unpackImage unpacks the OCI archive's image named dev into a directory:
// its layers' files, as a runtime lays them out.
func unpackImage(t *testing.T, archive string) (string, imageConfig) {
	t.Helper()
	dir := t.TempDir()
	if err := untarInto(archive, filepath.Join(dir, "layout"), nil); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(m.Manifests, func(d v1.Descriptor) bool { return d.Annotations["org.opencontainers.image.ref.name"] == "dev" })
	if i < 0 {
		t.Fatalf("no image named dev in %s", archive)
	}
	img, err := idx.Image(m.Manifests[i].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "rootfs")
	fs := mutate.Extract(img)
	defer fs.Close()
	if err := untarInto("", root, fs); err != nil {
		t.Fatal(err)
	}
	return root, imageConfig{entrypoint: cf.Config.Entrypoint, env: cf.Config.Env, labels: cf.Config.Labels}
}

// untarInto writes a tar's directories, files and symlinks under dir; the
// tar is the file archive, or r.
func untarInto(archive, dir string, r io.Reader) error {
	if r == nil {
		f, err := os.Open(archive)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm()); err == nil {
				_, err = io.Copy(f, tr)
				f.Close()
			}
		}
		if err != nil {
			return err
		}
	}
}

// bindInto binds the node's dir at the same path under root, recursively,
// until the test ends.
func bindInto(t *testing.T, root, dir string) {
	t.Helper()
	dst := filepath.Join(root, dir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dir, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		t.Fatalf("bind %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dst, syscall.MNT_DETACH) })
}

// chainRules are the node's rules in a nat chain, as iptables-save prints them.
func chainRules(t *testing.T, chain string) []string {
	t.Helper()
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			rules = append(rules, l)
		}
	}
	return rules
}
