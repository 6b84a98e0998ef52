package main

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	enginev2alpha2 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/scheduling/v2alpha2"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/api/common_info"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/api/eviction_info"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/api/pod_info"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/api/podgroup_info"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/cache/status_updater"
)

// recorder is a record.EventRecorder that keeps every event in memory, synchronously, formatted the way
// client-go's recorder formats them.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.add(object, eventtype, reason, message)
}

func (r *recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	r.add(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *recorder) AnnotatedEventf(
	object runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...interface{},
) {
	r.add(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *recorder) add(object runtime.Object, eventtype, reason, message string) {
	kind := fmt.Sprintf("%T", object)
	switch object.(type) {
	case *v1.Pod:
		kind = "Pod"
	case *enginev2alpha2.PodGroup:
		kind = "PodGroup"
	}
	event := Event{Kind: kind, Type: eventtype, Reason: reason, Message: message}
	if accessor, err := meta.Accessor(object); err == nil {
		event.Namespace, event.Name = accessor.GetNamespace(), accessor.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event)
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// evicted is what the scheduler reported when it evicted a PodGroup's pods.
type evicted struct {
	podGroup  string
	namespace string
	action    string
	preemptor string
	message   string
}

// capturingUpdater wraps KAI's own status updater: every call goes through unchanged, and what the scheduler
// decided (unschedulable explanations, evictions, pipelined pods) is also kept for the report.
type capturingUpdater struct {
	status_updater.Interface
	mu            sync.Mutex
	explanations  map[string][]enginev2alpha2.UnschedulableExplanation
	evictions     []evicted
	pipelinedPods []Event
}

func newCapturingUpdater(inner status_updater.Interface) *capturingUpdater {
	return &capturingUpdater{Interface: inner, explanations: map[string][]enginev2alpha2.UnschedulableExplanation{}}
}

func (c *capturingUpdater) RecordJobStatusEvent(
	job *podgroup_info.PodGroupInfo,
	resolveDetailedFitErrors func(*podgroup_info.PodGroupInfo, *pod_info.PodInfo) ([]*common_info.TasksFitError, error),
) error {
	if job.PodGroup != nil && (job.GetNumPendingTasks() > 0 || job.GetNumGatedTasks() > 0) {
		explanations := make([]enginev2alpha2.UnschedulableExplanation, 0, len(job.JobFitErrors))
		for _, fitError := range job.JobFitErrors {
			explanations = append(explanations, fitError.ToUnschedulableExplanation())
		}
		c.mu.Lock()
		c.explanations[job.PodGroup.Namespace+"/"+job.PodGroup.Name] = explanations
		c.mu.Unlock()
	}
	return c.Interface.RecordJobStatusEvent(job, resolveDetailedFitErrors)
}

func (c *capturingUpdater) Evicted(
	podGroup *enginev2alpha2.PodGroup, evictionMetadata eviction_info.EvictionMetadata, message string,
) {
	e := evicted{podGroup: podGroup.Name, namespace: podGroup.Namespace, action: evictionMetadata.Action, message: message}
	if evictionMetadata.Preemptor != nil {
		e.preemptor = evictionMetadata.Preemptor.Namespace + "/" + evictionMetadata.Preemptor.Name
	}
	c.mu.Lock()
	c.evictions = append(c.evictions, e)
	c.mu.Unlock()
	c.Interface.Evicted(podGroup, evictionMetadata, message)
}

func (c *capturingUpdater) Pipelined(pod *v1.Pod, message string) {
	c.mu.Lock()
	c.pipelinedPods = append(c.pipelinedPods, Event{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, Message: message})
	c.mu.Unlock()
	c.Interface.Pipelined(pod, message)
}
