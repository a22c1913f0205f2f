//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// deployObjects reads every object of the manifests deploy/kustomization.yaml
// lists, and checks that it lists every manifest there.
func deployObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var k struct{ Resources []string }
	data, err := os.ReadFile("deploy/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("deploy/*.yaml")
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(k.Resources, base) {
			t.Errorf("deploy/kustomization.yaml leaves out %s", base)
		}
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		data, err := os.ReadFile(filepath.Join("deploy", r))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			o := &unstructured.Unstructured{}
			if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			if len(o.Object) > 0 {
				objs = append(objs, o)
			}
		}
	}
	return objs
}

// TestDeployManifestsValidate: every manifest in deploy/ passes a
// server-side dry-run apply against the real kube-apiserver.
func TestDeployManifestsValidate(t *testing.T) {
	t.Parallel()
	objs := deployObjects(t)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	slices.Sort(kinds)
	if want := []string{"ClusterRoleBinding", "ConfigMap", "DaemonSet", "ServiceAccount"}; !slices.Equal(kinds, want) {
		t.Errorf("deploy/ holds %v, want %v", kinds, want)
	}
	if err := env.DryRunApply(objs); err != nil {
		t.Error(err)
	}
}

// deployConfig is the KubeProxyConfiguration the deploy ConfigMap holds.
func deployConfig(t *testing.T) string {
	t.Helper()
	for _, o := range deployObjects(t) {
		if o.GetKind() == "ConfigMap" {
			conf, ok, _ := unstructured.NestedString(o.Object, "data", "config.conf")
			if ok {
				return conf
			}
		}
	}
	t.Fatal("no config.conf in deploy/'s ConfigMap")
	return ""
}
