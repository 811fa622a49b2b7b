package printers

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
)

// describer writes kubectl describe's layout: "Key:  value" lines aligned
// per block, two spaces of indent per level.
type describer struct {
	tw *tabwriter.Writer
}

func (d *describer) line(level int, key string, value any) {
	indent := strings.Repeat("  ", level)
	if value == "" {
		value = "<none>"
	}
	if key == "" {
		fmt.Fprintf(d.tw, "%s%v\n", indent, value)
		return
	}
	fmt.Fprintf(d.tw, "%s%s:\t%v\n", indent, key, value)
}

// header starts a nested block: the key alone on its line.
func (d *describer) header(level int, key string) {
	fmt.Fprintf(d.tw, "%s%s:\n", strings.Repeat("  ", level), key)
}

// DescribePod prints one pod as kubectl describe pod does, with berth's
// events.
func DescribePod(w io.Writer, pod *v1.Pod, events []v1.Event, at time.Time) {
	d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	st := &pod.Status
	d.line(0, "Name", pod.Name)
	d.line(0, "Namespace", pod.Namespace)
	if pod.Spec.Priority != nil {
		d.line(0, "Priority", *pod.Spec.Priority)
	}
	if pod.Spec.PriorityClassName != "" {
		d.line(0, "Priority Class Name", pod.Spec.PriorityClassName)
	}
	node := orNone(pod.Spec.NodeName)
	if pod.Spec.NodeName != "" && st.HostIP != "" {
		node += "/" + st.HostIP
	}
	d.line(0, "Node", node)
	d.hostUsers(&pod.Spec)
	if st.StartTime != nil {
		d.line(0, "Start Time", st.StartTime.Time.Format(time.RFC1123Z))
	}
	d.mapLines(0, "Labels", pod.Labels, "=")
	d.mapLines(0, "Annotations", pod.Annotations, ": ")
	status := string(st.Phase)
	if pod.DeletionTimestamp != nil {
		status = "Terminating (since " + pod.DeletionTimestamp.Time.Format(time.RFC1123Z) + ")"
	}
	d.line(0, "Status", status)
	if st.Reason != "" {
		d.line(0, "Reason", st.Reason)
	}
	if st.Message != "" {
		d.line(0, "Message", st.Message)
	}
	d.line(0, "IP", st.PodIP)
	if len(st.PodIPs) > 0 {
		d.header(0, "IPs")
		for _, ip := range st.PodIPs {
			d.line(1, "IP", ip.IP)
		}
	} else {
		d.line(0, "IPs", "<none>")
	}
	if len(pod.Spec.InitContainers) > 0 {
		d.header(0, "Init Containers")
		d.containers(pod.Spec.InitContainers, st.InitContainerStatuses)
	}
	if len(pod.Spec.Containers) > 0 {
		d.header(0, "Containers")
		d.containers(pod.Spec.Containers, st.ContainerStatuses)
	}
	if len(st.Conditions) > 0 {
		d.header(0, "Conditions")
		d.line(1, "", "Type\tStatus")
		for _, c := range st.Conditions {
			// kubectl prints type and status only; berth adds why a
			// condition is False when it says, so a broken manifest's
			// file:line shows on the pod.
			if c.Status == v1.ConditionFalse && c.Message != "" {
				why := c.Message
				if c.Reason != "" {
					why = c.Reason + ": " + why
				}
				d.line(1, "", fmt.Sprintf("%s\t%s\t%s", c.Type, c.Status, why))
				continue
			}
			d.line(1, "", fmt.Sprintf("%s\t%s", c.Type, c.Status))
		}
	}
	d.volumes(pod.Spec.Volumes)
	if len(pod.Spec.ImagePullSecrets) > 0 {
		names := make([]string, 0, len(pod.Spec.ImagePullSecrets))
		for _, r := range pod.Spec.ImagePullSecrets {
			names = append(names, r.Name)
		}
		d.line(0, "Image Pull Secrets", strings.Join(names, ", "))
	}
	if st.QOSClass != "" {
		d.line(0, "QoS Class", st.QOSClass)
	}
	d.tw.Flush()
	describeEvents(w, events, at)
}

// mapLines prints a map sorted by key, one entry per line, "<none>" when
// empty.
func (d *describer) mapLines(level int, key string, m map[string]string, sep string) {
	if len(m) == 0 {
		d.line(level, key, "<none>")
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 0 {
			d.line(level, key, k+sep+m[k])
		} else {
			d.line(level, "", "\t"+k+sep+m[k])
		}
	}
}

func (d *describer) containers(specs []v1.Container, statuses []v1.ContainerStatus) {
	byName := map[string]v1.ContainerStatus{}
	for _, s := range statuses {
		byName[s.Name] = s
	}
	for _, c := range specs {
		s, ok := byName[c.Name]
		d.header(1, c.Name)
		if ok && s.ContainerID != "" {
			d.line(2, "Container ID", s.ContainerID)
		}
		d.line(2, "Image", c.Image)
		if ok && s.ImageID != "" {
			d.line(2, "Image ID", s.ImageID)
		}
		d.ports(c.Ports)
		d.list(2, "Command", c.Command)
		d.list(2, "Args", c.Args)
		if ok {
			d.state(2, "State", s.State)
			if s.LastTerminationState.Terminated != nil {
				d.state(2, "Last State", s.LastTerminationState)
			}
			d.line(2, "Ready", titleBool(s.Ready))
			d.line(2, "Restart Count", s.RestartCount)
		} else {
			d.line(2, "State", "Waiting")
			d.line(3, "Reason", "ContainerCreating")
		}
		d.resources(2, "Limits", c.Resources.Limits)
		d.resources(2, "Requests", c.Resources.Requests)
		d.probes(c)
		d.lifecycle(c)
		d.envFrom(c.EnvFrom)
		d.env(c.Env)
		if len(c.VolumeMounts) == 0 {
			d.line(2, "Mounts", "<none>")
		} else {
			d.header(2, "Mounts")
			for _, m := range c.VolumeMounts {
				mode := "rw"
				if m.ReadOnly {
					mode = "ro"
				}
				sub := ""
				if m.SubPath != "" {
					sub = ", path = \"" + m.SubPath + "\""
				}
				d.line(3, "", fmt.Sprintf("%s from %s (%s%s)", m.MountPath, m.Name, mode, sub))
			}
		}
	}
}

func (d *describer) ports(ports []v1.ContainerPort) {
	if len(ports) == 0 {
		d.line(2, "Port", "<none>")
		d.line(2, "Host Port", "<none>")
		return
	}
	var cp, hp []string
	for _, p := range ports {
		cp = append(cp, fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol))
		hp = append(hp, fmt.Sprintf("%d/%s", p.HostPort, p.Protocol))
	}
	d.line(2, "Port", strings.Join(cp, ", "))
	d.line(2, "Host Port", strings.Join(hp, ", "))
}

func (d *describer) list(level int, key string, items []string) {
	if len(items) == 0 {
		return
	}
	d.header(level, key)
	for _, it := range items {
		// Multi-line scripts keep their lines, indented under the key.
		for _, l := range strings.Split(strings.TrimRight(it, "\n"), "\n") {
			d.line(level+1, "", l)
		}
	}
}

func (d *describer) state(level int, key string, s v1.ContainerState) {
	switch {
	case s.Running != nil:
		d.line(level, key, "Running")
		d.line(level+1, "Started", s.Running.StartedAt.Time.Format(time.RFC1123Z))
	case s.Terminated != nil:
		t := s.Terminated
		d.line(level, key, "Terminated")
		d.line(level+1, "Reason", t.Reason)
		if t.Message != "" {
			d.line(level+1, "Message", t.Message)
		}
		d.line(level+1, "Exit Code", t.ExitCode)
		if t.Signal != 0 {
			d.line(level+1, "Signal", t.Signal)
		}
		d.line(level+1, "Started", t.StartedAt.Time.Format(time.RFC1123Z))
		d.line(level+1, "Finished", t.FinishedAt.Time.Format(time.RFC1123Z))
	case s.Waiting != nil:
		d.line(level, key, "Waiting")
		d.line(level+1, "Reason", s.Waiting.Reason)
		if s.Waiting.Message != "" {
			d.line(level+1, "Message", s.Waiting.Message)
		}
	default:
		d.line(level, key, "Waiting")
	}
}

func (d *describer) resources(level int, key string, rl v1.ResourceList) {
	if len(rl) == 0 {
		return
	}
	d.header(level, key)
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		q := rl[v1.ResourceName(n)]
		d.line(level+1, n, q.String())
	}
}

// envFrom names the ConfigMaps and Secrets a container takes all its
// variables from, as kubectl does; never their values.
func (d *describer) envFrom(srcs []v1.EnvFromSource) {
	if len(srcs) == 0 {
		return
	}
	d.header(2, "Environment Variables from")
	for _, src := range srcs {
		switch {
		case src.ConfigMapRef != nil:
			d.line(3, src.ConfigMapRef.Name, fmt.Sprintf("ConfigMap with prefix '%s'  Optional: %t", src.Prefix, isTrue(src.ConfigMapRef.Optional)))
		case src.SecretRef != nil:
			d.line(3, src.SecretRef.Name, fmt.Sprintf("Secret with prefix '%s'  Optional: %t", src.Prefix, isTrue(src.SecretRef.Optional)))
		}
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// env shows variables as kubectl does: values as written, references by
// what they point at.
func (d *describer) env(env []v1.EnvVar) {
	if len(env) == 0 {
		d.line(2, "Environment", "<none>")
		return
	}
	d.header(2, "Environment")
	for _, e := range env {
		value := e.Value
		if vf := e.ValueFrom; vf != nil {
			switch {
			case vf.FieldRef != nil:
				value = fmt.Sprintf("(%s:%s)", vf.FieldRef.APIVersion, vf.FieldRef.FieldPath)
			case vf.ResourceFieldRef != nil:
				value = fmt.Sprintf("%s (%s)", vf.ResourceFieldRef.Resource, orNone(vf.ResourceFieldRef.ContainerName))
			case vf.FileKeyRef != nil:
				value = fileKeyRefValue(vf.FileKeyRef)
			case vf.ConfigMapKeyRef != nil:
				r := vf.ConfigMapKeyRef
				value = fmt.Sprintf("<set to the key '%s' of config map '%s'>  Optional: %t", r.Key, r.Name, isTrue(r.Optional))
			case vf.SecretKeyRef != nil:
				r := vf.SecretKeyRef
				value = fmt.Sprintf("<set to the key '%s' in secret '%s'>  Optional: %t", r.Key, r.Name, isTrue(r.Optional))
			default:
				value = "<set from a reference>"
			}
		}
		d.line(3, e.Name, value)
	}
}

func (d *describer) volumes(vols []v1.Volume) {
	if len(vols) == 0 {
		d.line(0, "Volumes", "<none>")
		return
	}
	d.header(0, "Volumes")
	for _, v := range vols {
		d.header(1, v.Name)
		switch {
		case v.HostPath != nil:
			d.line(2, "Type", "HostPath (bare host directory volume)")
			d.line(2, "Path", v.HostPath.Path)
			typ := ""
			if v.HostPath.Type != nil {
				typ = string(*v.HostPath.Type)
			}
			d.line(2, "HostPathType", typ)
		case v.EmptyDir != nil:
			d.line(2, "Type", "EmptyDir (a temporary directory that shares a pod's lifetime)")
			d.line(2, "Medium", string(v.EmptyDir.Medium))
			limit := "<unset>"
			if v.EmptyDir.SizeLimit != nil {
				limit = v.EmptyDir.SizeLimit.String()
			}
			d.line(2, "SizeLimit", limit)
		case v.Image != nil:
			d.imageVolume(v.Image)
		case v.ConfigMap != nil:
			d.line(2, "Type", "ConfigMap (a volume populated by a ConfigMap)")
			d.line(2, "Name", v.ConfigMap.Name)
			d.line(2, "Optional", strconv.FormatBool(isTrue(v.ConfigMap.Optional)))
		case v.Secret != nil:
			d.line(2, "Type", "Secret (a volume populated by a Secret)")
			d.line(2, "SecretName", v.Secret.SecretName)
			d.line(2, "Optional", strconv.FormatBool(isTrue(v.Secret.Optional)))
		default:
			d.line(2, "Type", "<unknown>")
		}
	}
}

// describeEvents prints the events table, with kubectl's age column:
// "2m (x5 over 10m)" for a repeated event.
func describeEvents(w io.Writer, events []v1.Event, at time.Time) {
	if len(events) == 0 {
		fmt.Fprintln(w, "Events:           <none>")
		return
	}
	fmt.Fprintln(w, "Events:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tReason\tAge\tFrom\tMessage")
	fmt.Fprintln(tw, "  ----\t------\t----\t----\t-------")
	for _, e := range events {
		age := since(e.FirstTimestamp.Time, at)
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", since(e.LastTimestamp.Time, at), e.Count, since(e.FirstTimestamp.Time, at))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, e.Source.Component, strings.TrimSpace(e.Message))
	}
	tw.Flush()
}

func titleBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
