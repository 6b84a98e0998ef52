package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	enginev2 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/scheduling/v2"
	enginev2alpha2 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/scheduling/v2alpha2"
	"github.com/kai-scheduler/KAI-scheduler/pkg/common/constants"
	controllers "github.com/kai-scheduler/KAI-scheduler/pkg/podgrouper"
	"github.com/kai-scheduler/KAI-scheduler/pkg/podgrouper/podgroup"
	"github.com/kai-scheduler/KAI-scheduler/pkg/podgrouper/podgrouper"
	pluginshub "github.com/kai-scheduler/KAI-scheduler/pkg/podgrouper/podgrouper/hub"
)

func grouperScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	// cmd/podgrouper/app/app.go newScheme, plus the LeaderWorkerSet types so owners can be read back typed
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(enginev2.AddToScheme(scheme))
	utilruntime.Must(enginev2alpha2.AddToScheme(scheme))
	utilruntime.Must(lwsv1.AddToScheme(scheme))
	return scheme
}

// groupPods runs KAI's podgrouper over every pod that has no PodGroup yet, the way its pod controller
// (pkg/podgrouper/pod_controller.go Reconcile) does, against a fake API server holding the world's objects.
// It returns the world's PodGroups and pods updated with the pod-group-name annotation and subgroup label.
func groupPods(ctx context.Context, configs controllers.Configs, w *world) error {
	objects := make([]client.Object, 0, len(w.owners)+len(w.pods)+len(w.podGroups)+len(w.priorityClasses))
	for i := range w.owners {
		objects = append(objects, w.owners[i].DeepCopy())
	}
	for _, pod := range w.pods {
		objects = append(objects, pod.DeepCopy())
	}
	for _, pg := range w.podGroups {
		objects = append(objects, pg.DeepCopy())
	}
	for _, pc := range w.priorityClasses {
		objects = append(objects, pc.DeepCopy())
	}
	kube := crfake.NewClientBuilder().WithScheme(grouperScheme()).WithObjects(objects...).Build()

	hub := pluginshub.NewDefaultPluginsHub(kube, configs.SearchForLegacyPodGroups, configs.KnativeGangSchedule,
		configs.GenericKartaFallback, configs.SchedulingQueueLabelKey, configs.NodePoolLabelKey,
		configs.DefaultConfigPerTypeConfigMapName, configs.DefaultConfigPerTypeConfigMapNamespace)
	grouper := podgrouper.NewPodgrouper(kube, kube, hub)
	handler := podgroup.NewHandler(kube, configs.NodePoolLabelKey, configs.SchedulingQueueLabelKey)

	for _, pod := range w.pods {
		if _, grouped := pod.Annotations[constants.PodGroupAnnotationForPod]; grouped {
			continue
		}
		if err := reconcilePod(ctx, kube, grouper, handler, configs, pod); err != nil {
			return fmt.Errorf("podgrouper, pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}

	var pgs enginev2alpha2.PodGroupList
	if err := kube.List(ctx, &pgs); err != nil {
		return err
	}
	w.podGroups = w.podGroups[:0]
	for i := range pgs.Items {
		w.podGroups = append(w.podGroups, pgs.Items[i].DeepCopy())
	}
	for i, pod := range w.pods {
		var updated corev1.Pod
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), &updated); err != nil {
			return err
		}
		w.pods[i] = updated.DeepCopy()
	}
	return nil
}

// reconcilePod is the body of PodReconciler.Reconcile for one pod (that type's fields are unexported, so its
// steps are called here in the same order with the same skip rules).
func reconcilePod(
	ctx context.Context, kube client.Client, grouper podgrouper.Interface, handler *podgroup.Handler,
	configs controllers.Configs, pod *corev1.Pod,
) error {
	if pod.Spec.SchedulerName != configs.SchedulerName {
		return nil
	}
	if skipPodGrouper(pod) {
		return nil
	}
	if _, hasPG := pod.Annotations[constants.PodGroupAnnotationForPod]; hasPG && len(pod.OwnerReferences) == 0 {
		return nil
	}
	topOwner, allOwners, err := grouper.GetPodOwners(ctx, pod)
	if err != nil {
		return err
	}
	for _, owner := range allOwners {
		if skipPodGrouper(owner) {
			return nil
		}
	}
	metadata, err := grouper.GetPGMetadata(ctx, pod, topOwner, allOwners)
	if err != nil {
		return err
	}
	if metadata == nil {
		return nil
	}
	if configs.NodePoolLabelKey != "" {
		if _, found := metadata.Labels[configs.NodePoolLabelKey]; !found {
			if value, found := pod.Labels[configs.NodePoolLabelKey]; found {
				if metadata.Labels == nil {
					metadata.Labels = map[string]string{}
				}
				metadata.Labels[configs.NodePoolLabelKey] = value
			}
		}
	}
	if err := handler.ApplyToCluster(ctx, *metadata); err != nil {
		return err
	}

	patched := pod.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	if patched.Labels == nil {
		patched.Labels = map[string]string{}
	}
	patched.Annotations[constants.PodGroupAnnotationForPod] = metadata.Name
	if sg := metadata.FindSubGroupForPod(pod.Namespace, pod.Name); sg != nil {
		patched.Labels[constants.SubGroupLabelKey] = sg.Name
	}
	return kube.Patch(ctx, patched, client.MergeFrom(pod))
}

func skipPodGrouper(obj metav1.Object) bool {
	return obj.GetAnnotations()[constants.SkipPodGrouperAnnotation] == "true"
}
