// Command kubecheck reads Kubernetes manifests (the output of `helm template`) and checks that
// each object decodes strictly into its API type (k8s.io/api, and monitoring.coreos.com/v1 of
// the Prometheus operator), that the objects refer to each other correctly, and that every pod
// runs hardened. It is the last step of the Helm chart's test (deploy/deploytest).
//
//	helm template ... | kubecheck [-external NAME,...]
//
// Strict means what the API server means: a misspelt or unknown field, a repeated key, or a
// value of the wrong type (a number where a string belongs) is an error, as is an object whose
// kind no known API group defines.
//
// References checked: workload selectors match their pod templates; probes name container
// ports; ConfigMaps and Secrets that pods use (envFrom, env, volumes) are rendered, or listed in
// -external (objects the user creates: an existing Secret); a StatefulSet's serviceName is a
// rendered headless Service; Service, PodDisruptionBudget and ServiceMonitor selectors match a
// workload (or Service), and their ports exist; a NetworkPolicy selects a workload, names its
// container ports, and its peers' pod selectors select workloads; HPA targets and Ingress
// backends exist.
//
// Hardening checked on every pod: runAsNonRoot, and on every container readOnlyRootFilesystem,
// allowPrivilegeEscalation false, all capabilities dropped, resource requests and limits.
//
// On success it prints one JSON line, {"objects":[{"kind":K,"name":N},...]}, and exits 0; on
// failure it prints every problem to stderr and exits 1.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

func main() {
	external := flag.String("external", "", "comma-separated names of ConfigMaps and Secrets that exist outside the manifests")
	flag.Parse()
	var ext []string
	for _, n := range strings.Split(*external, ",") {
		if n = strings.TrimSpace(n); n != "" {
			ext = append(ext, n)
		}
	}
	objs, errs := decodeAll(os.Stdin)
	if len(errs) == 0 {
		errs = check(objs, ext)
	}
	if len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, "kubecheck:", err)
		}
		os.Exit(1)
	}
	type ref struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	}
	var out struct {
		Objects []ref `json:"objects"`
	}
	for _, o := range objs {
		out.Objects = append(out.Objects, ref{o.kind, o.name})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "kubecheck:", err)
		os.Exit(1)
	}
}

// object is one decoded manifest.
type object struct {
	kind, name string
	source     string // the "# Source:" comment helm writes, for messages
	obj        runtime.Object
}

func (o object) String() string { return fmt.Sprintf("%s %q (%s)", o.kind, o.name, o.source) }

var sourceComment = regexp.MustCompile(`(?m)^# Source: (.+)$`)

// newScheme knows the built-in API groups and the Prometheus operator's monitoring.coreos.com/v1.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeAll splits the YAML stream into documents and decodes each strictly.
func decodeAll(r io.Reader) ([]object, []error) {
	s, err := newScheme()
	if err != nil {
		return nil, []error{err}
	}
	var (
		objs []object
		errs []error
	)
	rd := k8syaml.NewYAMLReader(bufio.NewReader(r))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return objs, append(errs, fmt.Errorf("reading YAML: %w", err))
		}
		src := "?"
		if m := sourceComment.FindSubmatch(doc); m != nil {
			src = string(m[1])
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", src, err))
			continue
		}
		if len(probe) == 0 { // only comments
			continue
		}
		o, err := decode(s, doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", src, err))
			continue
		}
		o.source = src
		objs = append(objs, o)
	}
	if len(objs) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no objects in the input"))
	}
	return objs, errs
}

// decode converts YAML to JSON (a repeated key is an error) and decodes the JSON into the
// kind's Go type, refusing unknown fields and values of the wrong type, as the API server does.
func decode(s *runtime.Scheme, doc []byte) (object, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return object{}, err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(j, &tm); err != nil {
		return object{}, err
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return object{}, errors.New("apiVersion and kind are required")
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	obj, err := s.New(gvk)
	if err != nil {
		return object{}, fmt.Errorf("unknown kind %s: %w", gvk, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return object{}, fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	meta, ok := obj.(metav1.Object)
	if !ok || meta.GetName() == "" {
		return object{}, fmt.Errorf("%s: metadata.name is required", gvk.Kind)
	}
	return object{kind: gvk.Kind, name: meta.GetName(), obj: obj}, nil
}

// workload is an object with a pod template.
type workload struct {
	object
	selector *metav1.LabelSelector
	pod      *corev1.PodTemplateSpec
}

func workloads(objs []object) []workload {
	var ws []workload
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			ws = append(ws, workload{o, v.Spec.Selector, &v.Spec.Template})
		case *appsv1.StatefulSet:
			ws = append(ws, workload{o, v.Spec.Selector, &v.Spec.Template})
		case *appsv1.DaemonSet:
			ws = append(ws, workload{o, v.Spec.Selector, &v.Spec.Template})
		case *batchv1.Job:
			ws = append(ws, workload{o, nil, &v.Spec.Template})
		}
	}
	return ws
}

// matches reports whether labels satisfy selector (matchLabels and In/Exists expressions).
func matches(selector map[string]string, exprs []metav1.LabelSelectorRequirement, labels map[string]string) bool {
	if len(selector) == 0 && len(exprs) == 0 {
		return false // an empty selector selecting everything is never what a chart means
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	for _, e := range exprs {
		v, ok := labels[e.Key]
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if !ok || !slices.Contains(e.Values, v) {
				return false
			}
		case metav1.LabelSelectorOpNotIn:
			if ok && slices.Contains(e.Values, v) {
				return false
			}
		case metav1.LabelSelectorOpExists:
			if !ok {
				return false
			}
		case metav1.LabelSelectorOpDoesNotExist:
			if ok {
				return false
			}
		}
	}
	return true
}

func find(objs []object, kind, name string) (object, bool) {
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			return o, true
		}
	}
	return object{}, false
}

func containerPorts(pod *corev1.PodTemplateSpec) (names map[string]bool, numbers map[int32]bool) {
	names, numbers = map[string]bool{}, map[int32]bool{}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name != "" {
				names[p.Name] = true
			}
			numbers[p.ContainerPort] = true
		}
	}
	return names, numbers
}

// check runs the reference and hardening checks over the decoded objects.
func check(objs []object, external []string) []error {
	var errs []error
	bad := func(o fmt.Stringer, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", o, fmt.Sprintf(format, args...)))
	}
	seen := map[string]bool{}
	for _, o := range objs {
		k := o.kind + "/" + o.name
		if seen[k] {
			bad(o, "rendered twice")
		}
		seen[k] = true
	}
	exists := func(kind, name string) bool {
		_, ok := find(objs, kind, name)
		return ok || slices.Contains(external, name)
	}
	ws := workloads(objs)

	for _, w := range ws {
		if w.selector != nil && !matches(w.selector.MatchLabels, w.selector.MatchExpressions, w.pod.Labels) {
			bad(w, "spec.selector does not match the pod template's labels")
		}
		checkPod(w, func(format string, args ...any) { bad(w, format, args...) }, exists)
	}

	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.StatefulSet:
			svc, ok := find(objs, "Service", v.Spec.ServiceName)
			if !ok {
				bad(o, "serviceName %q is not a rendered Service", v.Spec.ServiceName)
			} else if s := svc.obj.(*corev1.Service); s.Spec.ClusterIP != corev1.ClusterIPNone {
				bad(o, "serviceName %q is not a headless Service (clusterIP: None)", v.Spec.ServiceName)
			}
		case *corev1.Service:
			var hit []workload
			for _, w := range ws {
				if w.kind != "Job" && matches(v.Spec.Selector, nil, w.pod.Labels) {
					hit = append(hit, w)
				}
			}
			if len(hit) == 0 {
				bad(o, "selector %v matches no workload", v.Spec.Selector)
				continue
			}
			for _, p := range v.Spec.Ports {
				for _, w := range hit {
					names, numbers := containerPorts(w.pod)
					if (p.TargetPort.StrVal != "" && !names[p.TargetPort.StrVal]) ||
						(p.TargetPort.StrVal == "" && p.TargetPort.IntVal != 0 && !numbers[p.TargetPort.IntVal]) {
						bad(o, "port %q: targetPort %s is not a container port of %s", p.Name, p.TargetPort.String(), w.name)
					}
				}
			}
		case *policyv1.PodDisruptionBudget:
			if v.Spec.Selector == nil || !slices.ContainsFunc(ws, func(w workload) bool {
				return w.kind != "Job" && matches(v.Spec.Selector.MatchLabels, v.Spec.Selector.MatchExpressions, w.pod.Labels)
			}) {
				bad(o, "selector matches no workload")
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			ref := v.Spec.ScaleTargetRef
			if !exists(ref.Kind, ref.Name) {
				bad(o, "scaleTargetRef %s %q is not rendered", ref.Kind, ref.Name)
			}
			if v.Spec.MinReplicas != nil && *v.Spec.MinReplicas > v.Spec.MaxReplicas {
				bad(o, "minReplicas %d > maxReplicas %d", *v.Spec.MinReplicas, v.Spec.MaxReplicas)
			}
			if len(v.Spec.Metrics) == 0 {
				bad(o, "no metrics")
			}
		case *networkingv1.Ingress:
			for _, r := range v.Spec.Rules {
				if r.HTTP == nil {
					continue
				}
				for _, p := range r.HTTP.Paths {
					s := p.Backend.Service
					if s == nil {
						bad(o, "path %q has no service backend", p.Path)
						continue
					}
					svc, ok := find(objs, "Service", s.Name)
					if !ok {
						bad(o, "backend service %q is not rendered", s.Name)
						continue
					}
					if !slices.ContainsFunc(svc.obj.(*corev1.Service).Spec.Ports, func(sp corev1.ServicePort) bool {
						return (s.Port.Name != "" && sp.Name == s.Port.Name) || (s.Port.Name == "" && sp.Port == s.Port.Number)
					}) {
						bad(o, "backend service %q has no port %q/%d", s.Name, s.Port.Name, s.Port.Number)
					}
				}
			}
			for _, t := range v.Spec.TLS {
				if t.SecretName == "" {
					bad(o, "tls entry without secretName")
				}
			}
		case *networkingv1.NetworkPolicy:
			// It selects a workload's pods, and the ports it opens are theirs (a misspelt port
			// name would shut the port); a peer's podSelector selects a workload too.
			var hit []workload
			for _, w := range ws {
				if w.kind != "Job" && matches(v.Spec.PodSelector.MatchLabels, v.Spec.PodSelector.MatchExpressions, w.pod.Labels) {
					hit = append(hit, w)
				}
			}
			if len(hit) == 0 {
				bad(o, "podSelector %v matches no workload", v.Spec.PodSelector.MatchLabels)
			}
			for _, r := range v.Spec.Ingress {
				for _, p := range r.Ports {
					for _, w := range hit {
						names, numbers := containerPorts(w.pod)
						if p.Port == nil || (p.Port.StrVal != "" && !names[p.Port.StrVal]) || (p.Port.StrVal == "" && !numbers[p.Port.IntVal]) {
							bad(o, "port %v is not a container port of %s", p.Port, w.name)
						}
					}
				}
				for _, peer := range r.From {
					if s := peer.PodSelector; s != nil && peer.NamespaceSelector == nil && !slices.ContainsFunc(ws, func(w workload) bool {
						return w.kind != "Job" && matches(s.MatchLabels, s.MatchExpressions, w.pod.Labels)
					}) {
						bad(o, "peer podSelector %v matches no workload", s.MatchLabels)
					}
				}
			}
		case *monitoringv1.ServiceMonitor:
			var svcs []*corev1.Service
			for _, so := range objs {
				if s, ok := so.obj.(*corev1.Service); ok && matches(v.Spec.Selector.MatchLabels, v.Spec.Selector.MatchExpressions, s.Labels) {
					svcs = append(svcs, s)
				}
			}
			if len(svcs) == 0 {
				bad(o, "selector matches no Service")
			}
			for _, ep := range v.Spec.Endpoints {
				for _, s := range svcs {
					if !slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == ep.Port }) {
						bad(o, "endpoint port %q is not a port of Service %q", ep.Port, s.Name)
					}
				}
			}
		}
	}
	return errs
}

// checkPod checks one pod template: probes, references to ConfigMaps and Secrets, hardening.
func checkPod(w workload, bad func(string, ...any), exists func(kind, name string) bool) {
	spec := &w.pod.Spec
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		bad("pod securityContext.runAsNonRoot is not true")
	}
	for _, v := range spec.Volumes {
		if cm := v.ConfigMap; cm != nil && !exists("ConfigMap", cm.Name) && (cm.Optional == nil || !*cm.Optional) {
			bad("volume %q: ConfigMap %q is not rendered", v.Name, cm.Name)
		}
		if s := v.Secret; s != nil && !exists("Secret", s.SecretName) && (s.Optional == nil || !*s.Optional) {
			bad("volume %q: Secret %q is not rendered", v.Name, s.SecretName)
		}
	}
	all := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for _, c := range all {
		where := func(format string, args ...any) { bad("container %q: "+format, append([]any{c.Name}, args...)...) }
		sc := c.SecurityContext
		switch {
		case sc == nil:
			where("no securityContext")
		default:
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				where("readOnlyRootFilesystem is not true")
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				where("allowPrivilegeEscalation is not false")
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				where("capabilities do not drop ALL")
			}
		}
		if len(c.Resources.Requests) == 0 || len(c.Resources.Limits) == 0 {
			where("resources need requests and limits")
		}
		if c.Image == "" {
			where("no image")
		}
		names, numbers := containerPorts(&corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}})
		for kind, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
			if p == nil || p.HTTPGet == nil {
				continue
			}
			port := p.HTTPGet.Port
			if (port.StrVal != "" && !names[port.StrVal]) || (port.StrVal == "" && !numbers[port.IntVal]) {
				where("%s probe port %s is not a container port", kind, port.String())
			}
		}
		for _, e := range c.EnvFrom {
			if r := e.ConfigMapRef; r != nil && !exists("ConfigMap", r.Name) && (r.Optional == nil || !*r.Optional) {
				where("envFrom ConfigMap %q is not rendered", r.Name)
			}
			if r := e.SecretRef; r != nil && !exists("Secret", r.Name) && (r.Optional == nil || !*r.Optional) {
				where("envFrom Secret %q is not rendered", r.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil && !exists("Secret", r.Name) && (r.Optional == nil || !*r.Optional) {
				where("env %s: Secret %q is not rendered", e.Name, r.Name)
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil && !exists("ConfigMap", r.Name) && (r.Optional == nil || !*r.Optional) {
				where("env %s: ConfigMap %q is not rendered", e.Name, r.Name)
			}
		}
		for _, m := range c.VolumeMounts {
			if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name }) {
				where("volumeMount %q has no volume", m.Name)
			}
		}
	}
}
