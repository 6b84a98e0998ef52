package main

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kaiv1 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/kai/v1"
	kaiv1alpha1 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/kai/v1alpha1"
	enginev2 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/scheduling/v2"
	enginev2alpha2 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/scheduling/v2alpha2"
)

// Input is what gpuscale sends: the KAI install, the cluster and the pods, arriving in waves.
type Input struct {
	Chart   Chart   `json:"chart"`
	Cluster Cluster `json:"cluster"`
	// Owners are the controllers of the pods (Deployment, ReplicaSet, LeaderWorkerSet, StatefulSet, leader Pods
	// are pods themselves): the podgrouper walks pod ownerReferences through them.
	Owners []unstructured.Unstructured `json:"owners"`
	// Waves of pods: wave k is created after the sessions of wave k-1 have settled.
	Waves [][]*corev1.Pod `json:"waves"`
	// MaxSessionsPerWave bounds the scheduling sessions run for one wave (sessions stop earlier once one
	// neither binds nor evicts).
	MaxSessionsPerWave int `json:"maxSessionsPerWave"`
}

// Chart holds the objects the KAI chart installs that configure scheduling, as the chart's templates render them
// from its values: the kai-config Config spec and the default SchedulingShard spec.
type Chart struct {
	KaiConfig       kaiv1.ConfigSpec          `json:"kaiConfig"`
	ShardName       string                    `json:"shardName"`
	SchedulingShard kaiv1.SchedulingShardSpec `json:"schedulingShard"`
}

// Cluster is everything but the workloads.
type Cluster struct {
	Nodes           []*corev1.Node                `json:"nodes"`
	Queues          []*enginev2.Queue             `json:"queues"`
	PriorityClasses []*schedulingv1.PriorityClass `json:"priorityClasses"`
	Topologies      []*kaiv1alpha1.Topology       `json:"topologies"`
}

// Output is what KAI decided.
type Output struct {
	KAIVersion string `json:"kaiVersion"`
	// SchedulerConfig is config.yaml of the scheduler ConfigMap the KAI operator renders for the shard.
	SchedulerConfig string           `json:"schedulerConfig"`
	SchedulerArgs   []string         `json:"schedulerArgs"`
	PodGrouperArgs  []string         `json:"podGrouperArgs"`
	Sessions        []SessionSummary `json:"sessions"`
	// UnsettledWaves are the waves whose last session still bound or evicted (MaxSessionsPerWave reached).
	UnsettledWaves []int            `json:"unsettledWaves"`
	Pods           []PodResult      `json:"pods"`
	PodGroups      []PodGroupResult `json:"podGroups"`
}

// SessionSummary is one scheduling cycle.
type SessionSummary struct {
	Wave      int        `json:"wave"`
	Index     int        `json:"index"`
	Binds     []Bind     `json:"binds"`
	Evictions []Eviction `json:"evictions"`
	Pipelined []Event    `json:"pipelined"`
}

// Bind is one BindRequest the scheduler created.
type Bind struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Node      string `json:"node"`
}

// Eviction is one pod the scheduler deleted to make room (reclaim, preempt, consolidation).
type Eviction struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodGroup  string `json:"podGroup"`
	Node      string `json:"node"`
	Action    string `json:"action"`
	Preemptor string `json:"preemptor"`
	Message   string `json:"message"`
}

// Event is one Kubernetes event the scheduler recorded.
type Event struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

// PodResult is where one pod ended up.
type PodResult struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	PodGroup  string `json:"podGroup"`
	SubGroup  string `json:"subGroup,omitempty"`
	// Node is empty while the pod is pending.
	Node string `json:"node"`
	// Events are the scheduler's events on the pod in the last session that saw it pending.
	Events []Event `json:"events"`
	// Evictions counts how often the scheduler evicted this pod (it was recreated pending each time).
	Evictions int `json:"evictions"`
}

// PodGroupResult is one PodGroup the podgrouper created and why the scheduler left it unscheduled, if it did.
type PodGroupResult struct {
	Namespace string                      `json:"namespace"`
	Name      string                      `json:"name"`
	Spec      enginev2alpha2.PodGroupSpec `json:"spec"`
	// Unschedulable are the PodGroup's UnschedulableExplanations from the last session that saw it pending.
	Unschedulable []enginev2alpha2.UnschedulableExplanation `json:"unschedulable"`
	// Events are the scheduler's events on the PodGroup in the last session that saw it pending.
	Events []Event `json:"events"`
}
