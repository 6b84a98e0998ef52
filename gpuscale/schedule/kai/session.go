package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	nrtfake "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	kaischedulerfake "github.com/kai-scheduler/KAI-scheduler/pkg/apis/client/clientset/versioned/fake"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/cache"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/cache/status_updater"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/conf_util"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/framework"
)

// sessionResult is what one scheduling session did.
type sessionResult struct {
	binds     []Bind
	deleted   map[string]bool
	events    []Event
	updater   *capturingUpdater
	pipelined []Event
}

// runSession replays one scheduling cycle of the real scheduler (pkg/scheduler/scheduler.go runOnce) over the
// world, with fake clients in place of the API server, as KAI's cmd/snapshot-tool does.
func runSession(ctx context.Context, inst *installation, w *world, sessionID string) (*sessionResult, error) {
	kubeClient := fake.NewSimpleClientset()
	kaiClient := kaischedulerfake.NewSimpleClientset()
	nrtClient := nrtfake.NewSimpleClientset()
	if err := loadWorld(ctx, kubeClient, kaiClient, w); err != nil {
		return nil, err
	}

	params := inst.schedulerParams
	schedulerCache := cache.New(&cache.SchedulerCacheParams{
		KubeClient:                  kubeClient,
		KAISchedulerClient:          kaiClient,
		NRTClient:                   nrtClient,
		SchedulerName:               params.SchedulerName,
		NodePoolParams:              params.PartitionParams,
		RestrictNodeScheduling:      params.RestrictSchedulingNodes,
		DetailedFitErrors:           params.DetailedFitErrors,
		ScheduleCSIStorage:          params.ScheduleCSIStorage,
		FullHierarchyFairness:       params.FullHierarchyFairness,
		AllowConsolidatingReclaim:   params.AllowConsolidatingReclaim,
		NumOfStatusRecordingWorkers: params.NumOfStatusRecordingWorkers,
		UpdatePodEvictionCondition:  params.UpdatePodEvictionCondition,
		StuckInReleasingThreshold:   params.StuckInReleasingThreshold,
		DiscoveryClient:             kubeClient.Discovery(),
	})
	concrete, ok := schedulerCache.(*cache.SchedulerCache)
	if !ok || concrete == nil {
		return nil, fmt.Errorf("KAI scheduler cache could not be created (see the log above)")
	}
	events := &recorder{}
	updater := newCapturingUpdater(status_updater.New(
		kubeClient, kaiClient, events, params.NumOfStatusRecordingWorkers, params.DetailedFitErrors,
		params.PartitionParams.NodePoolLabelKey,
	))
	concrete.StatusUpdater = updater

	stopCh := make(chan struct{})
	defer close(stopCh)
	schedulerCache.Run(stopCh)
	schedulerCache.WaitForCacheSync(stopCh)

	ssn, err := framework.OpenSession(schedulerCache, inst.schedulerConf, params, sessionID, &http.ServeMux{})
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	actions, err := conf_util.GetActionsFromConfig(inst.schedulerConf)
	if err != nil {
		framework.CloseSession(ssn)
		return nil, err
	}
	for _, action := range actions {
		action.Execute(ssn)
	}
	framework.CloseSession(ssn)

	result := &sessionResult{deleted: map[string]bool{}, updater: updater}
	bindRequests, err := kaiClient.SchedulingV1alpha2().BindRequests(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, br := range bindRequests.Items {
		result.binds = append(result.binds, Bind{Namespace: br.Namespace, Pod: br.Spec.PodName, Node: br.Spec.SelectedNode})
	}
	sort.Slice(result.binds, func(i, j int) bool {
		return result.binds[i].Namespace+"/"+result.binds[i].Pod < result.binds[j].Namespace+"/"+result.binds[j].Pod
	})
	remaining, err := kubeClient.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	alive := map[string]bool{}
	for i := range remaining.Items {
		alive[podKey(&remaining.Items[i])] = true
	}
	for _, pod := range w.pods {
		if !alive[podKey(pod)] {
			result.deleted[podKey(pod)] = true
		}
	}
	result.events = events.all()
	result.pipelined = updater.pipelinedPods
	return result, nil
}

func loadWorld(ctx context.Context, kubeClient *fake.Clientset, kaiClient *kaischedulerfake.Clientset, w *world) error {
	create := metav1.CreateOptions{}
	for _, node := range w.nodes {
		if _, err := kubeClient.CoreV1().Nodes().Create(ctx, node.DeepCopy(), create); err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
	}
	for _, pc := range w.priorityClasses {
		if _, err := kubeClient.SchedulingV1().PriorityClasses().Create(ctx, pc.DeepCopy(), create); err != nil {
			return fmt.Errorf("priority class %s: %w", pc.Name, err)
		}
	}
	for _, pod := range w.pods {
		if _, err := kubeClient.CoreV1().Pods(pod.Namespace).Create(ctx, pod.DeepCopy(), create); err != nil {
			return fmt.Errorf("pod %s: %w", podKey(pod), err)
		}
	}
	for _, queue := range w.queues {
		if _, err := kaiClient.SchedulingV2().Queues(queue.Namespace).Create(ctx, queue.DeepCopy(), create); err != nil {
			return fmt.Errorf("queue %s: %w", queue.Name, err)
		}
	}
	for _, pg := range w.podGroups {
		if _, err := kaiClient.SchedulingV2alpha2().PodGroups(pg.Namespace).Create(ctx, pg.DeepCopy(), create); err != nil {
			return fmt.Errorf("podgroup %s/%s: %w", pg.Namespace, pg.Name, err)
		}
	}
	for _, topology := range w.topologies {
		if _, err := kaiClient.KaiV1alpha1().Topologies().Create(ctx, topology.DeepCopy(), create); err != nil {
			return fmt.Errorf("topology %s: %w", topology.Name, err)
		}
	}
	return nil
}

func podKey(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}
