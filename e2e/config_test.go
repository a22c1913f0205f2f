//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// kubeadmConfig is a KubeProxyConfiguration as a kubeadm ConfigMap holds
// it, with the suite's settings, a scheduler the suite does not use, a
// primary address other than the Node's and a feature gate off (to see the
// file applied), and a field no version has.
const kubeadmConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
bindAddress: 192.168.19.1
clientConnection:
  kubeconfig: %s
clusterCIDR: ""
featureGates:
  AllowServiceExternalIPs: false
detectLocalMode: InterfaceNamePrefix
detectLocal:
  interfaceNamePrefix: kv
mode: ipvs
ipvs:
  scheduler: wrr
  syncPeriod: 5s
  minSyncPeriod: 100ms
  strictARP: true
  excludeCIDRs: [%s]
  tcpTimeout: 1000s
  tcpFinTimeout: 100s
  udpTimeout: 200s
iptables:
  masqueradeAll: false
  syncPeriod: 30s
udpIdleTimeout: 250ms
`

// TestConfigFile runs the proxier as kubeadm's DaemonSet does, from a
// configuration file and --hostname-override alone: it programs the kernel
// with the file's settings, names the unknown field in a Warning and an
// Event. A file with a bad value stops it at once, naming the field. The
// configuration of deploy/'s ConfigMap starts it too.
// Serial: it replaces the shared proxier for a while.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvs:\n  syncPeriod: 1s\n  minSyncPeriod: 5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := framework.Start(env, "kube-ipvs-proxy-bad-config", filepath.Join(env.Bin, "kube-ipvs-proxy"), "--config", bad)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a bad configuration refused", 10*time.Second, func() error {
		if done, err := p.Exited(); !done || err == nil {
			return fmt.Errorf("still running, or exited 0")
		}
		return nil
	})
	if log, _ := os.ReadFile(p.LogPath); !strings.Contains(string(log), "ipvs.minSyncPeriod") {
		t.Errorf("the refusal does not name ipvs.minSyncPeriod:\n%s", log)
	}

	// A load balancer whose source ranges hold the file's bindAddress but not
	// the Node's address: the node may reach it only with the file applied.
	mustNamespace(t, "config")
	lb := framework.ClusterIPService("config", "lb", "10.96.19.10", framework.Port("", v1.ProtocolTCP, 80, 8080))
	lb.Spec.Type, lb.Spec.LoadBalancerSourceRanges = v1.ServiceTypeLoadBalancer, []string{"192.168.19.0/24"}
	lb.Spec.AllocateLoadBalancerNodePorts = new(bool)
	lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.250.19.1"}}
	mustApply(t, lb)
	// Gone before the oracle: upstream writes blocked VIPs' rules in map
	// order, so a second one in a family would make its chain's order vary.
	t.Cleanup(func() {
		ctx, cancel := framework.Ctx()
		defer cancel()
		if err := env.Admin.CoreV1().Services("config").Delete(ctx, "lb", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete config/lb: %v", err)
		}
	})
	vip := mustAddr("10.250.19.1")
	fromVIP := ipset.Entry{IP: vip, Protocol: ipset.EntryTCP, Port: 80, IP2: vip}
	nodeAllowed := func(want bool) func() error {
		return func() error {
			entry, blocked := hasEntry(t, "KUBE-LOAD-BALANCER-SOURCE-IP", fromVIP), strings.Contains(ourIPTables(t), "--vaddr 10.250.19.1 ")
			if entry != want || blocked == want {
				return fmt.Errorf("the node's entry in KUBE-LOAD-BALANCER-SOURCE-IP: %v; its KUBE-IPVS-OUT-FILTER rule: %v; want the node allowed %v", entry, blocked, want)
			}
			return nil
		}
	}

	// External IPs: programmed with AllowServiceExternalIPs on (the
	// default), not with the file's gate off (kube-proxy v1.37's gate).
	external := framework.ClusterIPService("config", "external", "10.96.19.11", framework.Port("", v1.ProtocolTCP, 80, 8080))
	external.Spec.ExternalIPs = []string{"10.251.19.1"}
	externalSlice := framework.Slice("config", "external", "external-1", []discovery.EndpointPort{framework.SlicePort("", v1.ProtocolTCP, 8080)},
		framework.Endpoint("10.244.19.1", framework.NodeName, true))
	mustApply(t, external, externalSlice)
	t.Cleanup(func() {
		if err := env.DeleteService("config", "external"); err != nil {
			t.Errorf("delete config/external: %v", err)
		}
	})
	externalIPProgrammed := func(want bool) func() error {
		return func() error {
			_, ok, err := kernelIPVS(t).GetVirtualServer(ipvs.Key{Address: mustAddr("10.251.19.1"), Protocol: ipvs.TCP, Port: 80})
			if err != nil || ok != want {
				return fmt.Errorf("the external IP's virtual server there %v, %v; want %v", ok, err, want)
			}
			if _, ok, err := kernelIPVS(t).GetVirtualServer(ipvs.Key{Address: mustAddr("10.96.19.11"), Protocol: ipvs.TCP, Port: 80}); err != nil || !ok {
				return fmt.Errorf("the cluster IP's virtual server is missing (%v)", err)
			}
			return nil
		}
	}

	good := filepath.Join(dir, "config.conf")
	if err := os.WriteFile(good, []byte(fmt.Sprintf(kubeadmConfig, env.Kubeconfig("proxy"), excludedCIDR)), 0o644); err != nil {
		t.Fatal(err)
	}
	if shared != nil {
		if err := shared.Stop(); err != nil {
			t.Fatal(err)
		}
		replaceProxier(t, nil)
	}
	start := time.Now()
	p, err = framework.Start(env, "kube-ipvs-proxy-config", filepath.Join(env.Bin, "kube-ipvs-proxy"),
		"--config", good, "--hostname-override", framework.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop() }()
	if err := framework.WaitSynced(p, start, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	kubernetes := ipvs.Key{Address: mustAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 443}
	eventually(t, "default/kubernetes with the file's scheduler", 10*time.Second, func() error {
		vs, ok, err := kernelIPVS(t).GetVirtualServer(kubernetes)
		if err != nil || !ok || vs.Scheduler != "wrr" {
			return fmt.Errorf("virtual server %+v, present %v, %v", vs, ok, err)
		}
		return nil
	})
	eventually(t, "the node inside the source ranges by the file's bindAddress", 10*time.Second, nodeAllowed(true))
	eventually(t, "external IPs left out by the file's feature gate", 10*time.Second, externalIPProgrammed(false))
	if n := countLogLines(t, p, "udpIdleTimeout"); n != 1 {
		t.Errorf("the unknown field is named in %d log lines, want 1 (see %s)", n, p.LogPath)
	}
	if n := countLogLines(t, p, "iptables.syncPeriod"); n != 1 {
		t.Errorf("the other mode's field is named in %d log lines, want 1", n)
	}
	eventually(t, "an UnknownConfigFields Event", 10*time.Second, func() error {
		events, err := env.Events("default")
		if err != nil {
			return err
		}
		for _, e := range events {
			if strings.Contains(e, "UnknownConfigFields") && strings.Contains(e, "udpIdleTimeout") {
				return nil
			}
		}
		return fmt.Errorf("none in %v", events)
	})
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}

	// deploy/'s ConfigMap, with the DaemonSet's flags (and a kubeconfig
	// for the in-cluster account the VM lacks), starts the proxier.
	fromDeploy := filepath.Join(dir, "deploy.conf")
	if err := os.WriteFile(fromDeploy, []byte(deployConfig(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	p, err = framework.Start(env, "kube-ipvs-proxy-deploy-config", filepath.Join(env.Bin, "kube-ipvs-proxy"),
		"--config", fromDeploy, "--hostname-override", framework.NodeName, "--kubeconfig", env.Kubeconfig("proxy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitSynced(p, start, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node outside the source ranges by the Node's address", 10*time.Second, nodeAllowed(false))
	eventually(t, "external IPs programmed with the default gates", 10*time.Second, externalIPProgrammed(true))
	if err := p.Stop(); err != nil { // later tests start the suite's own
		t.Fatal(err)
	}
}

// TestWrittenConfigLoadsInUpstream: what --write-config-to writes, upstream
// kube-proxy v1.37 loads strictly and validates; /configz serves the same
// configuration.
func TestWrittenConfigLoadsInUpstream(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours.yaml")
	out, err := exec.Command(filepath.Join(env.Bin, "kube-ipvs-proxy"), append([]string{"--write-config-to", ours,
		"--hostname-override", framework.NodeName, "--kubeconfig", env.Kubeconfig("proxy")}, proxierFlags...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("--write-config-to: %v:\n%s", err, out)
	}
	out, err = exec.Command(filepath.Join(env.KBin, "kube-proxy"), "--config", ours, "--write-config-to", filepath.Join(dir, "upstream.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("upstream kube-proxy refused our configuration: %v:\n%s", err, out)
	}
	if strings.Contains(string(out), "strict") || strings.Contains(string(out), "unknown field") {
		t.Errorf("upstream kube-proxy loaded our configuration leniently:\n%s", out)
	}

	status, body := get(t, "http://127.0.0.1:10249/configz")
	if status != 200 || !strings.Contains(body, `"kubeproxy.config.k8s.io"`) || !strings.Contains(body, `"strictARP":true`) {
		t.Errorf("/configz: %d %s", status, body)
	}
}
