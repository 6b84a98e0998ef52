package main

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kaiv1alpha1 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/kai/v1alpha1"
	enginev2 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/scheduling/v2"
	enginev2alpha2 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/scheduling/v2alpha2"
	"github.com/kai-scheduler/KAI-scheduler/pkg/common/constants"
)

// world is the cluster state carried from one session to the next.
type world struct {
	nodes           []*corev1.Node
	queues          []*enginev2.Queue
	priorityClasses []*schedulingv1.PriorityClass
	topologies      []*kaiv1alpha1.Topology
	owners          []unstructured.Unstructured
	pods            []*corev1.Pod
	podGroups       []*enginev2alpha2.PodGroup
}

// podHistory is what the report keeps per pod across sessions.
type podHistory struct {
	events    []Event
	evictions int
}

// podGroupHistory is what the report keeps per PodGroup across sessions.
type podGroupHistory struct {
	explanations []enginev2alpha2.UnschedulableExplanation
	events       []Event
}

func replay(ctx context.Context, inst *installation, input *Input) (*Output, error) {
	w := &world{
		nodes:           input.Cluster.Nodes,
		queues:          input.Cluster.Queues,
		priorityClasses: input.Cluster.PriorityClasses,
		topologies:      input.Cluster.Topologies,
		owners:          input.Owners,
	}
	maxSessions := input.MaxSessionsPerWave
	if maxSessions <= 0 {
		maxSessions = defaultMaxSessionsPerWave
	}
	output := &Output{
		KAIVersion:      kaiVersion,
		SchedulerConfig: inst.schedulerConfigYAML,
		SchedulerArgs:   inst.schedulerArgs,
		PodGrouperArgs:  inst.podGrouperArgs,
		Sessions:        []SessionSummary{},
		UnsettledWaves:  []int{},
	}
	pods := map[string]*podHistory{}
	groups := map[string]*podGroupHistory{}
	seen := map[string]bool{}

	for waveIndex, wave := range input.Waves {
		for _, pod := range wave {
			if seen[podKey(pod)] {
				return nil, &inputError{fmt.Errorf("pod %s appears twice", podKey(pod))}
			}
			seen[podKey(pod)] = true
			w.pods = append(w.pods, pod.DeepCopy())
			pods[podKey(pod)] = &podHistory{}
		}
		settled := false
		for index := 0; index < maxSessions && !settled; index++ {
			if err := groupPods(ctx, inst.podGrouper, w); err != nil {
				return nil, &inputError{err}
			}
			result, err := runSession(ctx, inst, w, fmt.Sprintf("w%ds%d", waveIndex, index))
			if err != nil {
				return nil, err
			}
			summary := apply(w, result, pods, groups)
			summary.Wave, summary.Index = waveIndex, index
			output.Sessions = append(output.Sessions, summary)
			settled = len(summary.Binds) == 0 && len(summary.Evictions) == 0
		}
		if !settled {
			output.UnsettledWaves = append(output.UnsettledWaves, waveIndex)
		}
	}
	output.Pods, output.PodGroups = report(w, pods, groups)
	return output, nil
}

// apply carries one session's decisions into the world: the binder binds every BindRequest's pod, and every pod
// the scheduler deleted comes back pending, as its controller recreates it.
func apply(w *world, result *sessionResult, pods map[string]*podHistory, groups map[string]*podGroupHistory) SessionSummary {
	summary := SessionSummary{Binds: result.binds, Evictions: []Eviction{}, Pipelined: result.pipelined}
	if summary.Binds == nil {
		summary.Binds = []Bind{}
	}
	if summary.Pipelined == nil {
		summary.Pipelined = []Event{}
	}
	bound := map[string]string{}
	for _, b := range result.binds {
		bound[b.Namespace+"/"+b.Pod] = b.Node
	}
	evictionsByGroup := map[string]evicted{}
	for _, e := range result.updater.evictions {
		evictionsByGroup[e.namespace+"/"+e.podGroup] = e
	}

	for i, pod := range w.pods {
		key := podKey(pod)
		if result.deleted[key] {
			group := pod.Annotations[constants.PodGroupAnnotationForPod]
			e := evictionsByGroup[pod.Namespace+"/"+group]
			summary.Evictions = append(summary.Evictions, Eviction{
				Namespace: pod.Namespace, Pod: pod.Name, PodGroup: group, Node: pod.Spec.NodeName,
				Action: e.action, Preemptor: e.preemptor, Message: e.message,
			})
			pods[key].evictions++
			w.pods[i] = recreated(pod)
			continue
		}
		if node, ok := bound[key]; ok {
			w.pods[i] = boundTo(pod, node)
		}
	}

	for _, pod := range w.pods {
		if pod.Spec.NodeName != "" {
			continue
		}
		var events []Event
		for _, e := range result.events {
			if e.Kind == "Pod" && e.Namespace == pod.Namespace && e.Name == pod.Name {
				events = append(events, e)
			}
		}
		if events != nil {
			pods[podKey(pod)].events = events
		}
	}
	for key, explanations := range result.updater.explanations {
		h := groups[key]
		if h == nil {
			h = &podGroupHistory{}
			groups[key] = h
		}
		h.explanations = explanations
		h.events = nil
		for _, e := range result.events {
			if e.Kind == "PodGroup" && e.Namespace+"/"+e.Name == key {
				h.events = append(h.events, e)
			}
		}
	}
	return summary
}

// boundTo is the pod after the binder bound it and the kubelet started it.
func boundTo(pod *corev1.Pod, node string) *corev1.Pod {
	out := pod.DeepCopy()
	out.Spec.NodeName = node
	out.Status.Phase = corev1.PodRunning
	now := metav1.Now()
	out.Status.StartTime = &now
	out.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	return out
}

// recreated is the pod its controller creates after an eviction: same template, not yet grouped. It keeps name
// and UID, so the owner references of the objects it owns (an LWS leader owns its workers' StatefulSet) stay valid
// and its PodGroup is found again.
func recreated(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	out.ResourceVersion = ""
	out.Spec.NodeName = ""
	out.Status = corev1.PodStatus{Phase: corev1.PodPending}
	delete(out.Annotations, constants.PodGroupAnnotationForPod)
	delete(out.Labels, constants.SubGroupLabelKey)
	return out
}

func report(w *world, pods map[string]*podHistory, groups map[string]*podGroupHistory) ([]PodResult, []PodGroupResult) {
	podResults := make([]PodResult, 0, len(w.pods))
	for _, pod := range w.pods {
		h := pods[podKey(pod)]
		r := PodResult{
			Namespace: pod.Namespace, Name: pod.Name,
			PodGroup:  pod.Annotations[constants.PodGroupAnnotationForPod],
			SubGroup:  pod.Labels[constants.SubGroupLabelKey],
			Node:      pod.Spec.NodeName,
			Events:    []Event{},
			Evictions: h.evictions,
		}
		if pod.Spec.NodeName == "" && h.events != nil {
			r.Events = h.events
		}
		podResults = append(podResults, r)
	}
	sort.Slice(podResults, func(i, j int) bool {
		return podResults[i].Namespace+"/"+podResults[i].Name < podResults[j].Namespace+"/"+podResults[j].Name
	})

	pending := map[string]bool{}
	for _, pod := range w.pods {
		if pod.Spec.NodeName == "" {
			pending[pod.Namespace+"/"+pod.Annotations[constants.PodGroupAnnotationForPod]] = true
		}
	}
	groupResults := make([]PodGroupResult, 0, len(w.podGroups))
	for _, pg := range w.podGroups {
		key := pg.Namespace + "/" + pg.Name
		r := PodGroupResult{
			Namespace: pg.Namespace, Name: pg.Name, Spec: pg.Spec,
			Unschedulable: []enginev2alpha2.UnschedulableExplanation{}, Events: []Event{},
		}
		if h := groups[key]; h != nil && pending[key] {
			if h.explanations != nil {
				r.Unschedulable = h.explanations
			}
			if h.events != nil {
				r.Events = h.events
			}
		}
		groupResults = append(groupResults, r)
	}
	sort.Slice(groupResults, func(i, j int) bool {
		return groupResults[i].Namespace+"/"+groupResults[i].Name < groupResults[j].Namespace+"/"+groupResults[j].Name
	})
	return podResults, groupResults
}
