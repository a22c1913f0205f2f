//go:build e2e

package node

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// migrationDoc holds the in-place switch's commands, which this test runs.
const migrationDoc = "docs/migration.md"

// docBlock is the shell block that follows the comment <!-- marker: ... -->
// in migrationDoc, its IMAGE= line set to image: the commands an operator
// copies, with the image they pushed.
func docBlock(t *testing.T, marker, image string) string {
	t.Helper()
	doc, err := os.ReadFile(migrationDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- " + marker + ":[^>]*-->\\s*```sh\\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s has no ```sh block after <!-- %s: -->", migrationDoc, marker)
	}
	lines := strings.Split(string(m[1]), "\n")
	set := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "IMAGE=") {
			lines[i], set = "IMAGE="+image, set+1
		}
	}
	if set != 1 {
		t.Fatalf("the %s block sets IMAGE %d times, want once", marker, set)
	}
	return strings.Join(lines, "\n")
}

// runDocBlock runs migrationDoc's block marker with IMAGE set to image,
// and logs its output and time.
func runDocBlock(t *testing.T, marker, image string) {
	t.Helper()
	start := time.Now()
	out, err := env.Script(docBlock(t, marker, image))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s done after %s:\n%s", marker, time.Since(start).Round(time.Second), out)
}

// TestInPlaceSwitch runs docs/migration.md's kubectl commands on kubeadm's
// kube-proxy DaemonSet and ConfigMap (the upstream run's: kubeadm v1.37.2's
// output, plus the bed's readiness probe, which the switch adds itself
// too): switched in, the DaemonSet runs our image and command
// with kubeadm's configuration file, no request fails, our proxier writes
// nothing to the kernel kube-proxy left, and the update strategy is
// kubeadm's again; the way back is run and measured too.
func TestInPlaceSwitch(t *testing.T) {
	if deployed.Name != "kube-proxy" {
		t.Skip("the switch starts from kubeadm's kube-proxy: the upstream run's DaemonSet")
	}
	ours := framework.Ours(os.Getenv("KIP_IMAGE_TAG"))
	ourImage, theirs := ours.Image+":"+ours.Tag, deployed.Image+":"+deployed.Tag

	t.Run("In", func(t *testing.T) { switchIn(t, ourImage) })
	if t.Failed() {
		return
	}
	t.Run("Back", func(t *testing.T) { switchBack(t, theirs) })
}

func switchIn(t *testing.T, ourImage string) {
	// Real servers kube-proxy keeps at weight 0 for their connections to
	// end (earlier tests' pods) are ours to delete once they have: the
	// only writes allowed.
	draining := drainingRealServers(t)
	loops := serviceLoops(t)
	runDocBlock(t, "switch-in", ourImage)
	pod, image := mustProxierPod(t)
	if image != ourImage {
		t.Fatalf("after the switch %s runs %s, want %s", pod, image, ourImage)
	}
	ds := daemonSet(t)
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Command[0] != "/usr/local/bin/kube-ipvs-proxy" || !strings.Contains(strings.Join(c.Command, " "), "--config=/var/lib/kube-proxy/config.conf") {
		t.Errorf("after the switch the command is %q", c.Command)
	}
	if got := string(ds.Spec.UpdateStrategy.Type); got != "RollingUpdate" {
		t.Errorf("after the switch the update strategy is %s, want kubeadm's RollingUpdate", got)
	}
	// Ours, with kubeadm's configuration file, adopted the kernel as
	// kube-proxy left it.
	if err := framework.Eventually(30*time.Second, time.Second, func() error {
		all, err := framework.Scrape()
		if err != nil {
			return err
		}
		ops, ok := all["kube_ipvs_proxy_kernel_operations_total"]
		if !ok {
			return fmt.Errorf("no kube_ipvs_proxy_kernel_operations_total on :10249: not our proxier")
		}
		if ops > float64(draining) {
			t.Errorf("our proxier wrote %v kernel objects over kube-proxy's state, want 0 (or up to the %d draining real servers it deletes)", ops, draining)
		}
		t.Logf("our proxier wrote %v kernel objects over kube-proxy's state (%d real servers were draining)", ops, draining)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	framework.RequireNoFailures(t, loops...)
}

func switchBack(t *testing.T, theirs string) {
	loops := serviceLoops(t)
	runDocBlock(t, "switch-back", theirs)
	if pod, image := mustProxierPod(t); image != theirs {
		t.Fatalf("after the way back %s runs %s, want %s", pod, image, theirs)
	}
	time.Sleep(3 * time.Second)
	framework.LogFailures(t, "switching back to kube-proxy", loops...)
}

// daemonSet is the DaemonSet under test as the apiserver has it.
func daemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	ctx, cancel := framework.Ctx()
	defer cancel()
	ds, err := env.Admin.AppsV1().DaemonSets("kube-system").Get(ctx, deployed.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// drainingRealServers counts the real servers at weight 0 in the node's
// IPVS table.
func drainingRealServers(t *testing.T) int {
	t.Helper()
	out, err := framework.Output("ipvsadm", "-Ln")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == "->" && f[3] == "0" {
			n++
		}
	}
	return n
}
