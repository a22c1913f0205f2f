// Command demo shows kube-ipvs-proxy at work inside the test VM: it starts
// the proxier against the test apiserver, creates a few Services backed by
// pods (network namespaces running an echo server), prints the kernel state
// the proxier programmed and sends requests through the cluster IPs, and
// from a client outside the node through a NodePort and a LoadBalancer IP.
// `make demo` runs it; it exits non-zero if any request goes unanswered.
package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

func show(args ...string) {
	fmt.Printf("$ %s\n", strings.Join(args, " "))
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	fmt.Print(string(out))
	if err != nil {
		fmt.Println("(", err, ")")
	}
}

func run() error {
	env, err := framework.Load()
	if err != nil {
		return err
	}
	if err := framework.CleanKernel(); err != nil {
		return err
	}
	// The kernel's messages (IPVS says "no destination available" for a
	// Service without endpoints) stay in dmesg, off the VM's console where
	// they would interleave with this output.
	if err := os.WriteFile("/proc/sys/kernel/printk", []byte("1"), 0o644); err != nil {
		fmt.Println("(kernel messages stay on the console:", err, ")")
	}
	step("starting kube-ipvs-proxy as system:kube-proxy (log: %s/kube-ipvs-proxy-demo.log)", env.Artifacts)
	start := time.Now()
	proxy, err := framework.StartOurs(env, "kube-ipvs-proxy-demo")
	if err != nil {
		return err
	}
	defer proxy.Stop()
	if err := framework.WaitSynced(proxy, start, 2*time.Minute); err != nil {
		return err
	}
	fmt.Printf("first sync done %s after start\n", time.Since(start).Round(time.Millisecond))

	step("creating pods (network namespaces with an echo server) and Services")
	var pods []*framework.Pod
	defer func() {
		for _, p := range pods {
			p.Delete()
		}
	}()
	for i, name := range []string{"web-1", "web-2", "web-3", "dns-1", "dns-2"} {
		p, err := framework.StartPod(env, name, netip.AddrFrom4([4]byte{10, 244, 1, byte(i + 1)}), true)
		if err != nil {
			return err
		}
		pods = append(pods, p)
	}
	client, err := framework.StartPod(env, "client", netip.MustParseAddr("10.244.1.100"), false)
	if err != nil {
		return err
	}
	pods = append(pods, client)
	// A host on the node's network, outside the cluster.
	outside, err := framework.StartPod(env, "outside", netip.MustParseAddr("192.168.100.2"), false)
	if err != nil {
		return err
	}
	pods = append(pods, outside)
	if err := env.CreateNamespace("demo"); err != nil {
		return err
	}
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	eps := func(pods ...*framework.Pod) []discovery.Endpoint {
		var out []discovery.Endpoint
		for _, p := range pods {
			out = append(out, framework.Endpoint(p.IP.String(), framework.NodeName, true))
		}
		return out
	}
	// web is a LoadBalancer: a cluster IP, node port 30080, and the ingress
	// IP a load-balancer controller would have written to its status.
	webSvc := framework.ClusterIPService("demo", "web", "10.96.100.10", framework.Port("http", tcp, 80, 8080))
	webSvc.Spec.Type = v1.ServiceTypeLoadBalancer
	webSvc.Spec.Ports[0].NodePort = 30080
	webSvc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.168.200.10"}}
	if err := env.Apply(
		webSvc,
		framework.Slice("demo", "web", "web-abc", []discovery.EndpointPort{framework.SlicePort("http", tcp, 8080)}, eps(pods[0:3]...)...),
		framework.ClusterIPService("demo", "dns", "10.96.100.53", framework.Port("dns", udp, 53, 5353)),
		framework.Slice("demo", "dns", "dns-abc", []discovery.EndpointPort{framework.SlicePort("dns", udp, 5353)}, eps(pods[3:5]...)...),
	); err != nil {
		return err
	}
	fmt.Println("service demo/web  LoadBalancer 192.168.200.10:80, NodePort 30080, 10.96.100.10:80/TCP -> web-1, web-2, web-3 :8080")
	fmt.Println("service demo/dns  10.96.100.53:53/UDP -> dns-1, dns-2 :5353")

	web, dns := netip.MustParseAddrPort("10.96.100.10:80"), netip.MustParseAddrPort("10.96.100.53:53")
	lb := netip.MustParseAddrPort("192.168.200.10:80")
	// Both Services, and web's ingress IP (its status is written after the
	// Service), so the table below shows everything the demo created.
	if err := framework.Eventually(30*time.Second, 100*time.Millisecond, func() error {
		if _, err := client.HTTP(web, time.Second); err != nil {
			return fmt.Errorf("web: %w", err)
		}
		if _, err := outside.HTTP(lb, time.Second); err != nil {
			return fmt.Errorf("web's LoadBalancer IP: %w", err)
		}
		_, err := client.UDP(dns, time.Second)
		return err
	}); err != nil {
		return fmt.Errorf("the demo Services never answered: %w", err)
	}

	step("what kube-ipvs-proxy programmed")
	show("ipvsadm", "-Ln")
	show("ip", "-4", "addr", "show", "dev", "kube-ipvs0")
	show("ipset", "list", "KUBE-CLUSTER-IP")
	show("ipset", "list", "KUBE-LOAD-BALANCER")

	step("requests from the client pod through the cluster IPs")
	for i := 0; i < 6; i++ {
		who, err := client.HTTP(web, 2*time.Second)
		if err != nil {
			return fmt.Errorf("GET http://%s/: %w", web, err)
		}
		fmt.Printf("GET http://%s/  answered by %s\n", web, who)
	}
	for i := 0; i < 4; i++ {
		who, err := client.UDP(dns, 2*time.Second)
		if err != nil {
			return fmt.Errorf("UDP %s: %w", dns, err)
		}
		fmt.Printf("UDP %s     answered by %s\n", dns, who)
	}
	step("requests from a host outside the node (192.168.100.2): the NodePort and the LoadBalancer IP")
	for _, to := range []netip.AddrPort{netip.MustParseAddrPort(framework.NodeIP + ":30080"), lb} {
		for i := 0; i < 3; i++ {
			who, err := outside.HTTP(to, 2*time.Second)
			if err != nil {
				return fmt.Errorf("GET http://%s/ from outside: %w", to, err)
			}
			fmt.Printf("GET http://%s/  answered by %s\n", to, who)
		}
	}
	step("done: every request was answered through IPVS programmed by kube-ipvs-proxy")
	return nil
}
