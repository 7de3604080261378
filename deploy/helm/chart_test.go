// Package helm checks the Helm chart in marketd/ offline: `helm lint
// --strict`, then `helm template` of the default values and of
// values-ha.yaml, with every rendered document decoded strictly (unknown
// and duplicate fields are errors, field names are case-sensitive, as the
// API server's strict field validation) into its Go type: k8s.io/api for
// Kubernetes' kinds, the prometheus-operator module's monitoring/v1 for
// ServiceMonitor and PrometheusRule. No schema is fetched. Then the objects
// are checked against each other (selectors, named ports, Secrets and
// ConfigMaps referenced, hooks) and against the repository (ops/alerts.yml,
// the README's settings).
//
// helm is bin/helm at the repository's root, put there by .ci/helm (built
// from the Go module proxy once, then copied from a cache).
package helm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "marketd"
	// The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion).
	minKube = "1.30.0"
)

// newObject is every kind the chart may render, by apiVersion/kind.
var newObject = map[string]func() metav1.Object{
	"v1/ConfigMap":                            func() metav1.Object { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() metav1.Object { return &corev1.Secret{} },
	"v1/Service":                              func() metav1.Object { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() metav1.Object { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                      func() metav1.Object { return &appsv1.Deployment{} },
	"batch/v1/Job":                            func() metav1.Object { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget":           func() metav1.Object { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() metav1.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() metav1.Object { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() metav1.Object { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() metav1.Object { return &monitoringv1.PrometheusRule{} },
}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm runs bin/helm (installed by .ci/helm when missing or of another
// version) with a Helm home of the test's own, so that nothing of the
// machine's Helm configuration or repositories is read.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	helmOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "../../.ci/helm")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf(".ci/helm (builds helm from the Go module proxy into bin/helm): %v\n%s", err, stderr.Bytes())
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	home := t.TempDir()
	cmd := exec.Command(helmPath, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out, nil
}

// render is `helm template` of the chart with these extra arguments
// (values files, --set), decoded strictly.
func render(t *testing.T, args ...string) *rendered {
	t.Helper()
	out, err := helm(t, append([]string{"template", "market", chartDir, "--namespace", "market", "--kube-version", minKube}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeAll(out)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rendered is a release's objects by apiVersion/kind, then name.
type rendered struct {
	objects map[string]map[string]metav1.Object
	raw     map[string][]byte
}

func (r *rendered) names(kind string) []string {
	var out []string
	for n := range r.objects[kind] {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func get[T any](t *testing.T, r *rendered, kind, name string) T {
	t.Helper()
	o, ok := r.objects[kind][name]
	if !ok {
		t.Fatalf("no %s %q rendered (have %v)", kind, name, r.names(kind))
	}
	return any(o).(T)
}

func all[T any](r *rendered, kind string) []T {
	var out []T
	for _, n := range r.names(kind) {
		out = append(out, any(r.objects[kind][n]).(T))
	}
	return out
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeAll splits helm's output into documents and decodes each into its
// type: YAML to JSON refusing duplicate keys, then JSON into the type
// refusing unknown and duplicate fields, names matched case-sensitively.
func decodeAll(out []byte) (*rendered, error) {
	r := &rendered{objects: map[string]map[string]metav1.Object{}, raw: map[string][]byte{}}
	for _, doc := range docSep.Split(string(out), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%v in\n%s", err, doc)
		}
		var tm metav1.TypeMeta
		if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
			return nil, fmt.Errorf("%v in\n%s", err, doc)
		}
		key := tm.APIVersion + "/" + tm.Kind
		mk, ok := newObject[key]
		if !ok {
			return nil, fmt.Errorf("a kind the test does not know: %s (add it to newObject) in\n%s", key, doc)
		}
		obj := mk()
		strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err != nil {
			return nil, fmt.Errorf("%s: %v in\n%s", key, err, doc)
		}
		if len(strict) > 0 {
			return nil, fmt.Errorf("%s %s: strict decoding: %v in\n%s", key, obj.GetName(), strict, doc)
		}
		if r.objects[key] == nil {
			r.objects[key] = map[string]metav1.Object{}
		}
		if _, dup := r.objects[key][obj.GetName()]; dup {
			return nil, fmt.Errorf("%s %q rendered twice", key, obj.GetName())
		}
		r.objects[key][obj.GetName()] = obj
		r.raw[key+"/"+obj.GetName()] = []byte(doc)
	}
	if len(r.objects) == 0 {
		return nil, fmt.Errorf("helm template rendered nothing:\n%s", out)
	}
	return r, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

const (
	kDeploy = "apps/v1/Deployment"
	kSvc    = "v1/Service"
	kCM     = "v1/ConfigMap"
	kSecret = "v1/Secret"
	kSA     = "v1/ServiceAccount"
	kJob    = "batch/v1/Job"
	kPDB    = "policy/v1/PodDisruptionBudget"
	kHPA    = "autoscaling/v2/HorizontalPodAutoscaler"
	kNP     = "networking.k8s.io/v1/NetworkPolicy"
	kSM     = "monitoring.coreos.com/v1/ServiceMonitor"
	kRule   = "monitoring.coreos.com/v1/PrometheusRule"
)

func TestLintStrict(t *testing.T) {
	for _, values := range [][]string{nil, {"-f", filepath.Join(chartDir, "values-ha.yaml")}} {
		out, err := helm(t, append([]string{"lint", "--strict", chartDir, "--namespace", "market"}, values...)...)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out, []byte("1 chart(s) linted, 0 chart(s) failed")) {
			t.Fatalf("helm lint %v:\n%s", values, out)
		}
	}
}

// TestDefault: one replica of each role, the chart's own Secret, nothing
// that needs the prometheus-operator's CRDs, no autoscaler.
func TestDefault(t *testing.T) {
	r := render(t)
	checkRelease(t, r)
	for _, c := range []string{"api", "worker", "scheduler"} {
		d := get[*appsv1.Deployment](t, r, kDeploy, "market-marketd-"+c)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("%s: replicas %v, want 1", c, d.Spec.Replicas)
		}
	}
	for _, k := range []string{kHPA, kSM, kRule, kNP} {
		if len(r.objects[k]) > 0 {
			t.Errorf("default values rendered %s %v", k, r.names(k))
		}
	}
	s := get[*corev1.Secret](t, r, kSecret, "market-marketd")
	if _, ok := s.Data["MARKET_SECRET_KEY"]; !ok {
		t.Errorf("the chart's Secret lacks MARKET_SECRET_KEY: %v", s.Data)
	}
	// The first install's hook reads a copy of the Secret made before it.
	hs := get[*corev1.Secret](t, r, kSecret, "market-marketd-migrate")
	if hs.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" || hookWeight(t, hs) >= hookWeight(t, get[*batchv1.Job](t, r, kJob, "market-marketd-migrate")) {
		t.Errorf("the migration's Secret copy is not a hook made before the Job: %v", hs.Annotations)
	}
	if !cmp.Equal(hs.Data, s.Data) {
		t.Errorf("the hook's Secret differs from the chart's")
	}
}

// TestHA: values-ha.yaml: an autoscaled api of 2+, 2 workers, 2
// schedulers, Sentinel and a read replica passed through, an existing
// Secret, ServiceMonitor, PrometheusRule and NetworkPolicy.
func TestHA(t *testing.T) {
	r := render(t, "-f", filepath.Join(chartDir, "values-ha.yaml"))
	checkRelease(t, r)
	api := get[*appsv1.Deployment](t, r, kDeploy, "market-marketd-api")
	if api.Spec.Replicas != nil {
		t.Errorf("api: replicas %d set beside its autoscaler", *api.Spec.Replicas)
	}
	hpa := get[*autoscalingv2.HorizontalPodAutoscaler](t, r, kHPA, "market-marketd-api")
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas < *hpa.Spec.MinReplicas {
		t.Errorf("api autoscaler: min %v max %d, want min ≥ 2", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
	}
	for _, c := range []string{"worker", "scheduler"} {
		d := get[*appsv1.Deployment](t, r, kDeploy, "market-marketd-"+c)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("%s: replicas %v, want 2", c, d.Spec.Replicas)
		}
		if len(d.Spec.Template.Spec.TopologySpreadConstraints) == 0 {
			t.Errorf("%s: not spread over nodes", c)
		}
	}
	for _, c := range []string{"api", "worker", "scheduler"} {
		get[*policyv1.PodDisruptionBudget](t, r, kPDB, "market-marketd-"+c)
	}
	cm := get[*corev1.ConfigMap](t, r, kCM, "market-marketd")
	for _, k := range []string{"MARKET_REDIS_SENTINEL_ADDRS", "MARKET_REDIS_SENTINEL_MASTER", "MARKET_DATABASE_READ_URL"} {
		if cm.Data[k] == "" {
			t.Errorf("ConfigMap lacks %s", k)
		}
	}
	// Its user, password and database are the existing Secret's.
	if _, ok := cm.Data["MARKET_REDIS_URL"]; ok {
		t.Errorf("ConfigMap has MARKET_REDIS_URL beside the Sentinel settings")
	}
	// The existing Secret is read; the chart makes none.
	if len(r.objects[kSecret]) > 0 {
		t.Errorf("with existingSecret the chart rendered Secrets %v", r.names(kSecret))
	}
	for _, d := range all[*appsv1.Deployment](r, kDeploy) {
		if !slices.Contains(secretRefs(d.Spec.Template.Spec), "marketd-env") {
			t.Errorf("%s does not read the existing Secret marketd-env", d.Name)
		}
	}
	for _, k := range []string{kSM, kRule, kNP} {
		if len(r.objects[k]) != 1 {
			t.Errorf("%s: rendered %v, want one", k, r.names(k))
		}
	}
}

// TestAlertsInSync: the chart's copy of the alert rules is ops/alerts.yml
// (a chart reads only its own files); `make helm-sync` copies it.
func TestAlertsInSync(t *testing.T) {
	want, err := os.ReadFile("../../ops/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("deploy/helm/marketd/files/alerts.yml differs from ops/alerts.yml: run make helm-sync")
	}
}

// TestChecksumsRollPods: a change of a setting or a secret changes the
// pods' checksum annotations, so the Deployments roll.
func TestChecksumsRollPods(t *testing.T) {
	base := render(t)
	cfg := render(t, "--set", "config.MARKET_LOG_LEVEL=debug")
	sec := render(t, "--set", "secrets.MARKET_SECRET_KEY=0000000000000000000000000000000000000000000000000000000000000000")
	existing := render(t, "--set", "existingSecret=mine", "--set", "existingSecretRevision=2")
	for _, c := range []string{"api", "worker", "scheduler"} {
		name := "market-marketd-" + c
		ann := func(r *rendered) map[string]string {
			return get[*appsv1.Deployment](t, r, kDeploy, name).Spec.Template.Annotations
		}
		b := ann(base)
		if b["checksum/config"] == "" || b["checksum/secret"] == "" {
			t.Fatalf("%s: no checksum annotations: %v", c, b)
		}
		if ann(cfg)["checksum/config"] == b["checksum/config"] {
			t.Errorf("%s: checksum/config unchanged by a config change", c)
		}
		if ann(sec)["checksum/secret"] == b["checksum/secret"] || ann(sec)["checksum/config"] != b["checksum/config"] {
			t.Errorf("%s: a secret change: checksum/secret %s → %s", c, b["checksum/secret"], ann(sec)["checksum/secret"])
		}
		if ann(existing)["checksum/secret"] == b["checksum/secret"] {
			t.Errorf("%s: existingSecretRevision does not change checksum/secret", c)
		}
	}
}

// TestRefused: what the chart sets itself, a key in both config and
// secrets, an autoscaler whose maximum is below its minimum and a value
// the chart does not have fail the render with a message naming the value.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "config.MARKET_OPS_ADDR=:9000"}, "ports.ops"},
		{[]string{"--set", "config.MARKET_SECRET_KEY=x"}, "both config and secrets"},
		{[]string{"--set", "api.autoscaling.enabled=true", "--set", "api.autoscaling.maxReplicas=1"}, "maxReplicas"},
		// values.schema.json: a misspelt value is an error, not a silent default.
		{[]string{"--set", "api.replica=2"}, "'replica' not allowed"},
		{[]string{"--set", "image.pullPolicy=Sometimes"}, "pullPolicy"},
	} {
		_, err := helm(t, append([]string{"template", "market", chartDir, "--kube-version", minKube}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template %v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}

func hookWeight(t *testing.T, o metav1.Object) int {
	t.Helper()
	var w int
	if _, err := fmt.Sscan(o.GetAnnotations()["helm.sh/hook-weight"], &w); err != nil {
		t.Fatalf("%s: hook weight: %v", o.GetName(), err)
	}
	return w
}

// envFrom is the names of the ConfigMaps and the Secrets a pod reads whole
// as its environment.
func envFrom(spec corev1.PodSpec) (configMaps, secrets []string) {
	for _, c := range spec.Containers {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				configMaps = append(configMaps, e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				secrets = append(secrets, e.SecretRef.Name)
			}
		}
	}
	return configMaps, secrets
}

func secretRefs(spec corev1.PodSpec) []string { _, s := envFrom(spec); return s }

func configMapRefs(spec corev1.PodSpec) []string { c, _ := envFrom(spec); return c }

// checkRelease: what holds for any values: names and labels Kubernetes
// accepts, roles and their pods as operators need them, and every
// reference between objects resolving.
func checkRelease(t *testing.T, r *rendered) {
	t.Helper()
	for kind, objs := range r.objects {
		for name, o := range objs {
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				t.Errorf("%s %q: %v", kind, name, errs)
			}
			if kind == kSvc {
				if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
					t.Errorf("Service %q: %v", name, errs)
				}
			}
			checkLabels(t, kind+" "+name, o.GetLabels())
			if o.GetLabels()["app.kubernetes.io/instance"] != "market" || o.GetLabels()["app.kubernetes.io/name"] != "marketd" {
				t.Errorf("%s %q: labels %v lack the chart's", kind, name, o.GetLabels())
			}
		}
	}

	// The roles: the process each Deployment runs, and its pods.
	deploys := all[*appsv1.Deployment](r, kDeploy)
	var roles []string
	for _, d := range deploys {
		roles = append(roles, d.Spec.Template.Spec.Containers[0].Args...)
		checkDeployment(t, r, d)
	}
	if !slices.Equal(roles, []string{"api", "scheduler", "worker"}) {
		t.Errorf("Deployments run %v, want api, scheduler, worker", roles)
	}

	// Services select pods that have the ports they target.
	for _, s := range all[*corev1.Service](r, kSvc) {
		pods := selected(r, labels.SelectorFromSet(s.Spec.Selector))
		if len(pods) == 0 {
			t.Errorf("Service %s selects no pod", s.Name)
		}
		for _, p := range s.Spec.Ports {
			for _, pod := range pods {
				if !hasPort(pod, p.TargetPort.String()) {
					t.Errorf("Service %s: a selected pod has no port %s", s.Name, p.TargetPort.String())
				}
			}
		}
	}
	api := get[*corev1.Service](t, r, kSvc, "market-marketd")
	if len(selected(r, labels.SelectorFromSet(api.Spec.Selector))) != 1 || api.Spec.PublishNotReadyAddresses {
		t.Errorf("the api Service selects other roles' pods or pods that are not ready")
	}
	ops := get[*corev1.Service](t, r, kSvc, "market-marketd-ops")
	if len(selected(r, labels.SelectorFromSet(ops.Spec.Selector))) != 3 {
		t.Errorf("the ops Service does not select the three roles")
	}

	// PDBs: one per role at most, each selecting one Deployment's pods.
	for _, p := range all[*policyv1.PodDisruptionBudget](r, kPDB) {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(selected(r, sel)); n != 1 {
			t.Errorf("PDB %s selects %d Deployments' pods, want 1", p.Name, n)
		}
		if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
			t.Errorf("PDB %s: neither maxUnavailable nor minAvailable", p.Name)
		}
	}

	// The autoscaler scales the api.
	for _, h := range all[*autoscalingv2.HorizontalPodAutoscaler](r, kHPA) {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != "market-marketd-api" {
			t.Errorf("HPA %s scales %+v, want the api Deployment", h.Name, ref)
		}
		get[*appsv1.Deployment](t, r, kDeploy, ref.Name)
	}

	checkMigrations(t, r)

	// The ServiceMonitor scrapes the ops Service's port.
	for _, sm := range all[*monitoringv1.ServiceMonitor](r, kSM) {
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		var svcs []string
		for _, s := range all[*corev1.Service](r, kSvc) {
			if sel.Matches(labels.Set(s.Labels)) {
				svcs = append(svcs, s.Name)
			}
		}
		if !slices.Equal(svcs, []string{"market-marketd-ops"}) {
			t.Errorf("ServiceMonitor selects Services %v, want the ops Service", svcs)
		}
		for _, e := range sm.Spec.Endpoints {
			if e.Port != "ops" || e.Path != "/metrics" {
				t.Errorf("ServiceMonitor endpoint %+v, want port ops, /metrics", e)
			}
		}
	}

	// The PrometheusRule is ops/alerts.yml.
	for _, pr := range all[*monitoringv1.PrometheusRule](r, kRule) {
		if diff := cmp.Diff(alertRules(t), pr.Spec); diff != "" {
			t.Errorf("PrometheusRule differs from ops/alerts.yml (-alerts.yml +rendered):\n%s", diff)
		}
	}

	// The NetworkPolicy covers the release's pods and names their ports.
	for _, np := range all[*networkingv1.NetworkPolicy](r, kNP) {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if len(selected(r, sel)) != 3 {
			t.Errorf("NetworkPolicy %s does not cover the three roles", np.Name)
		}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port == nil || (p.Port.String() != "http" && p.Port.String() != "ops") {
					t.Errorf("NetworkPolicy %s: port %v, want http or ops", np.Name, p.Port)
				}
			}
		}
	}

	checkSettings(t, r)
}

func checkLabels(t *testing.T, what string, l map[string]string) {
	t.Helper()
	for k, v := range l {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("%s: label key %q: %v", what, k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("%s: label %s=%q: %v", what, k, v, errs)
		}
	}
}

// selected is the pod templates of the Deployments the selector matches.
func selected(r *rendered, sel labels.Selector) []corev1.PodSpec {
	var out []corev1.PodSpec
	for _, d := range all[*appsv1.Deployment](r, kDeploy) {
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d.Spec.Template.Spec)
		}
	}
	return out
}

func hasPort(spec corev1.PodSpec, name string) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name || fmt.Sprint(p.ContainerPort) == name {
				return true
			}
		}
	}
	return false
}

func checkDeployment(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("%s: selector %v does not match its pods' labels %v", d.Name, sel, d.Spec.Template.Labels)
	}
	checkLabels(t, d.Name+" pods", d.Spec.Template.Labels)
	for _, a := range []string{"checksum/config", "checksum/secret"} {
		if len(d.Spec.Template.Annotations[a]) != 64 {
			t.Errorf("%s: pod annotation %s = %q, want a SHA-256", d.Name, a, d.Spec.Template.Annotations[a])
		}
	}
	spec := d.Spec.Template.Spec
	role := spec.Containers[0].Args[0]
	checkPodSecurity(t, d.Name, spec)
	if sa := spec.ServiceAccountName; sa != "" && sa != "default" {
		get[*corev1.ServiceAccount](t, r, kSA, sa)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: the service account token is mounted", d.Name)
	}
	for _, cm := range configMapRefs(spec) {
		get[*corev1.ConfigMap](t, r, kCM, cm)
	}
	for _, s := range secretRefs(spec) {
		if len(r.objects[kSecret]) > 0 {
			get[*corev1.Secret](t, r, kSecret, s)
		}
	}
	if len(secretRefs(spec)) != 1 || len(configMapRefs(spec)) != 1 {
		t.Errorf("%s: reads ConfigMaps %v and Secrets %v, want one of each", d.Name, configMapRefs(spec), secretRefs(spec))
	}
	c := spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	var opsPort int32
	for _, p := range c.Ports {
		if p.Name == "ops" {
			opsPort = p.ContainerPort
		}
	}
	// The ops listener must listen on every address (the default is loopback).
	if opsPort == 0 || env["MARKET_OPS_ADDR"] != fmt.Sprintf(":%d", opsPort) {
		t.Errorf("%s: MARKET_OPS_ADDR %q, ops port %d", d.Name, env["MARKET_OPS_ADDR"], opsPort)
	}
	// Go's soft limit below the container's: the api derives it from the
	// cgroup itself, the other roles get it from the chart.
	if lim := c.Resources.Limits.Memory(); !lim.IsZero() {
		if soft, ok := env["GOMEMLIMIT"]; ok || role != "api" {
			q, err := resource.ParseQuantity(strings.TrimSuffix(soft, "B"))
			if err != nil || q.Cmp(*lim) >= 0 || q.Value() < lim.Value()/2 {
				t.Errorf("%s: GOMEMLIMIT %q (%v), want 50-100 %% of the memory limit %s", d.Name, soft, err, lim)
			}
			// Under a soft limit the worker collects only near it (GOGC
			// off): its resident set settles there, within its request.
			if req := c.Resources.Requests.Memory(); role == "worker" && err == nil && req.Cmp(q) < 0 {
				t.Errorf("%s: memory request %s below GOMEMLIMIT %q, where the worker's resident set settles", d.Name, req, soft)
			}
		}
	}
	if role == "api" && !hasPort(spec, "http") {
		t.Errorf("%s: no http port", d.Name)
	}
	for what, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "ops" {
			t.Errorf("%s: %s probe %+v, want an HTTP GET on the ops port", d.Name, what, p)
			continue
		}
		want := "/healthz"
		if what == "readiness" {
			want = "/readyz"
		}
		if p.HTTPGet.Path != want {
			t.Errorf("%s: %s probe on %s, want %s", d.Name, what, p.HTTPGet.Path, want)
		}
	}
	if role == "api" && (c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil) {
		t.Errorf("%s: no preStop sleep: the endpoints may still send requests after SIGTERM", d.Name)
	}
	if d.Spec.Template.Spec.TerminationGracePeriodSeconds == nil || *d.Spec.Template.Spec.TerminationGracePeriodSeconds < 30 {
		t.Errorf("%s: termination grace period below the 15 s drain plus the worker's 20 s", d.Name)
	}
	if d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("%s: a rolling update may take a replica down before its successor is ready", d.Name)
	}
}

// checkPodSecurity: non-root, read-only root filesystem, no privilege
// escalation, no capabilities, sized resources, a writable /tmp.
func checkPodSecurity(t *testing.T, name string, spec corev1.PodSpec) {
	t.Helper()
	ps := spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v, want non-root with RuntimeDefault seccomp", name, ps)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s/%s: securityContext %+v, want read-only, non-root, no escalation, capabilities dropped", name, c.Name, sc)
		}
		req, lim := c.Resources.Requests, c.Resources.Limits
		if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() || lim.Memory().Cmp(*req.Memory()) < 0 {
			t.Errorf("%s/%s: resources %+v, want CPU and memory requests and a memory limit above the request", name, c.Name, c.Resources)
		}
		tmp := false
		for _, m := range c.VolumeMounts {
			tmp = tmp || m.MountPath == "/tmp"
		}
		if !tmp {
			t.Errorf("%s/%s: no writable /tmp", name, c.Name)
		}
	}
}

// checkMigrations: `marketd migrate` as a pre-install/pre-upgrade hook, with
// the settings of the roles, from objects that exist when it runs.
func checkMigrations(t *testing.T, r *rendered) {
	t.Helper()
	j := get[*batchv1.Job](t, r, kJob, "market-marketd-migrate")
	if j.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" {
		t.Errorf("migrate Job: hook %q", j.Annotations["helm.sh/hook"])
	}
	if !strings.Contains(j.Annotations["helm.sh/hook-delete-policy"], "before-hook-creation") {
		t.Errorf("migrate Job: an upgrade cannot replace the previous Job: %v", j.Annotations)
	}
	spec := j.Spec.Template.Spec
	if spec.RestartPolicy != corev1.RestartPolicyNever || j.Spec.BackoffLimit == nil || j.Spec.ActiveDeadlineSeconds == nil {
		t.Errorf("migrate Job: restartPolicy %s, backoffLimit %v, activeDeadlineSeconds %v", spec.RestartPolicy, j.Spec.BackoffLimit, j.Spec.ActiveDeadlineSeconds)
	}
	c := spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "migrate" {
		t.Errorf("migrate Job runs %v", c.Args)
	}
	checkPodSecurity(t, j.Name, spec)
	// Made by the release itself, the ConfigMap and the ServiceAccount do
	// not exist yet when the first install's hook runs.
	if len(configMapRefs(spec)) > 0 {
		t.Errorf("migrate Job reads ConfigMaps %v, which do not exist before the first install", configMapRefs(spec))
	}
	if sa := spec.ServiceAccountName; sa != "" && r.objects[kSA][sa] != nil {
		t.Errorf("migrate Job runs as the release's ServiceAccount %s, which does not exist before the first install", sa)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	cm := get[*corev1.ConfigMap](t, r, kCM, "market-marketd")
	for k, v := range cm.Data {
		if env[k] != v {
			t.Errorf("migrate Job: %s = %q, the roles have %q", k, env[k], v)
		}
	}
	for _, s := range secretRefs(spec) {
		if sec, ok := r.objects[kSecret][s]; ok && sec.GetAnnotations()["helm.sh/hook"] == "" {
			t.Errorf("migrate Job reads Secret %s, which the release makes after its hooks", s)
		}
	}
	// The roles' Secret, whichever it is, gives the Job the same keys.
	d := get[*appsv1.Deployment](t, r, kDeploy, "market-marketd-api")
	roleSecrets, jobSecrets := secretRefs(d.Spec.Template.Spec), secretRefs(spec)
	if len(roleSecrets) != len(jobSecrets) {
		t.Errorf("migrate Job reads Secrets %v, the roles %v", jobSecrets, roleSecrets)
	}
	for i := range jobSecrets {
		if jobSecrets[i] != roleSecrets[i] {
			a, b := r.objects[kSecret][jobSecrets[i]], r.objects[kSecret][roleSecrets[i]]
			if a == nil || b == nil || !cmp.Equal(a.(*corev1.Secret).Data, b.(*corev1.Secret).Data) {
				t.Errorf("migrate Job reads Secret %s, the roles %s, with other content", jobSecrets[i], roleSecrets[i])
			}
		}
	}
}

// checkSettings: every setting the chart passes is one marketd reads (the
// README's configuration table, rendered from config.go), or PGPASSWORD.
func checkSettings(t *testing.T, r *rendered) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"PGPASSWORD": true}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]+)` \\|").FindAllSubmatch(readme, -1) {
		known[string(m[1])] = true
	}
	if !known["MARKET_DATABASE_URL"] || !known["MARKET_OPS_ADDR"] {
		t.Fatalf("the README's configuration table was not found")
	}
	var names []string
	for _, cm := range all[*corev1.ConfigMap](r, kCM) {
		for k := range cm.Data {
			names = append(names, k)
		}
	}
	for _, s := range all[*corev1.Secret](r, kSecret) {
		for k := range s.Data {
			names = append(names, k)
		}
	}
	for _, d := range all[*appsv1.Deployment](r, kDeploy) {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			names = append(names, e.Name)
		}
	}
	for _, n := range names {
		if !known[n] {
			t.Errorf("the chart sets %s, which is not in the README's configuration table", n)
		}
	}
}

// alertRules is ops/alerts.yml decoded strictly as a PrometheusRule's spec.
func alertRules(t *testing.T) monitoringv1.PrometheusRuleSpec {
	t.Helper()
	raw, err := os.ReadFile("../../ops/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		t.Fatal(err)
	}
	var spec monitoringv1.PrometheusRuleSpec
	strict, err := kjson.UnmarshalStrict(js, &spec, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil || len(strict) > 0 {
		t.Fatalf("ops/alerts.yml as a PrometheusRule spec: %v %v", err, strict)
	}
	if len(spec.Groups) == 0 || len(spec.Groups[0].Rules) < 8 {
		t.Fatalf("ops/alerts.yml: %d groups", len(spec.Groups))
	}
	return spec
}
