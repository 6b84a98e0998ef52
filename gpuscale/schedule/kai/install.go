package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	podgrouperapp "github.com/kai-scheduler/KAI-scheduler/cmd/podgrouper/app"
	schedulerapp "github.com/kai-scheduler/KAI-scheduler/cmd/scheduler/app"
	scheduleroptions "github.com/kai-scheduler/KAI-scheduler/cmd/scheduler/app/options"
	kaiv1 "github.com/kai-scheduler/KAI-scheduler/pkg/apis/kai/v1"
	podgrouperoperand "github.com/kai-scheduler/KAI-scheduler/pkg/operator/operands/pod_grouper"
	scheduleroperand "github.com/kai-scheduler/KAI-scheduler/pkg/operator/operands/scheduler"
	controllers "github.com/kai-scheduler/KAI-scheduler/pkg/podgrouper"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/conf"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/conf_util"
)

// installation is the scheduler and podgrouper configuration the KAI operator derives from the chart's objects.
type installation struct {
	schedulerConfigYAML string
	schedulerArgs       []string
	podGrouperArgs      []string
	schedulerConf       *conf.SchedulerConfiguration
	schedulerParams     *conf.SchedulerParams
	podGrouper          controllers.Configs
}

// install runs the KAI operator's own operands over the chart's Config and SchedulingShard, then parses the
// rendered ConfigMap and container arguments with the scheduler's and podgrouper's own flag sets.
func install(chart Chart) (*installation, error) {
	ctx := context.Background()
	reader := crfake.NewClientBuilder().Build()

	kaiConfig := &kaiv1.Config{ObjectMeta: metav1.ObjectMeta{Name: "kai-config"}, Spec: *chart.KaiConfig.DeepCopy()}
	kaiConfig.Spec.SetDefaultsWhereNeeded()
	shard := &kaiv1.SchedulingShard{ObjectMeta: metav1.ObjectMeta{Name: chart.ShardName}, Spec: *chart.SchedulingShard.DeepCopy()}
	shard.Spec.SetDefaultsWhereNeeded()

	schedulerObjects, err := scheduleroperand.NewSchedulerForShard(shard).DesiredState(ctx, reader, kaiConfig)
	if err != nil {
		return nil, fmt.Errorf("KAI operator, scheduler operand: %w", err)
	}
	configYAML, schedulerArgs, err := configMapAndArgs(schedulerObjects)
	if err != nil {
		return nil, fmt.Errorf("KAI operator, scheduler operand: %w", err)
	}
	schedulerConf, err := resolveSchedulerConf(configYAML)
	if err != nil {
		return nil, err
	}
	serverOptions := scheduleroptions.NewServerOption()
	schedulerFlags := pflag.NewFlagSet("kai-scheduler", pflag.ContinueOnError)
	serverOptions.AddFlags(schedulerFlags)
	if err := schedulerFlags.Parse(schedulerArgs); err != nil {
		return nil, fmt.Errorf("scheduler arguments %v: %w", schedulerArgs, err)
	}
	applyGlobalConfig(serverOptions)

	grouperObjects, err := (&podgrouperoperand.PodGrouper{}).DesiredState(ctx, reader, kaiConfig)
	if err != nil {
		return nil, fmt.Errorf("KAI operator, podgrouper operand: %w", err)
	}
	_, grouperArgs, err := configMapAndArgs(grouperObjects)
	if err != nil {
		return nil, fmt.Errorf("KAI operator, podgrouper operand: %w", err)
	}
	var grouperOptions podgrouperapp.Options
	grouperFlags := flag.NewFlagSet("pod-grouper", flag.ContinueOnError)
	grouperOptions.AddFlags(grouperFlags)
	if err := grouperFlags.Parse(grouperArgs); err != nil {
		return nil, fmt.Errorf("podgrouper arguments %v: %w", grouperArgs, err)
	}

	return &installation{
		schedulerConfigYAML: configYAML,
		schedulerArgs:       schedulerArgs,
		podGrouperArgs:      grouperArgs,
		schedulerConf:       schedulerConf,
		schedulerParams:     schedulerapp.BuildSchedulerParams(serverOptions),
		podGrouper:          grouperOptions.Configs(),
	}, nil
}

// configMapAndArgs picks the scheduler config.yaml (if any) and the container arguments out of an operand's objects.
func configMapAndArgs(objects []client.Object) (string, []string, error) {
	configYAML := ""
	var args []string
	foundDeployment := false
	for _, object := range objects {
		switch typed := object.(type) {
		case *corev1.ConfigMap:
			configYAML = typed.Data["config.yaml"]
		case *appsv1.Deployment:
			if len(typed.Spec.Template.Spec.Containers) == 0 {
				return "", nil, fmt.Errorf("deployment %s has no container", typed.Name)
			}
			args = typed.Spec.Template.Spec.Containers[0].Args
			foundDeployment = true
		}
	}
	if !foundDeployment {
		return "", nil, fmt.Errorf("no Deployment among the desired objects (is the service disabled?)")
	}
	return configYAML, args, nil
}

// resolveSchedulerConf loads config.yaml the way the scheduler binary does: from a file, with its defaulting.
func resolveSchedulerConf(configYAML string) (*conf.SchedulerConfiguration, error) {
	dir, err := os.MkdirTemp("", "kai-schedule-conf-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(configYAML), 0o600); err != nil {
		return nil, err
	}
	schedulerConf, err := conf_util.ResolveConfigurationFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("scheduler config.yaml: %w", err)
	}
	return schedulerConf, nil
}

// applyGlobalConfig is cmd/scheduler/app/server.go setConfig (unexported there): the process-wide settings the
// scheduler binary copies from its flags before the first session.
func applyGlobalConfig(so *scheduleroptions.ServerOption) {
	config := conf.GetConfig()
	config.ResourceReservationAppLabelValue = so.ResourceReservationAppLabel
	config.CPUWorkerNodeLabelKey = so.CPUWorkerNodeLabelKey
	config.GPUWorkerNodeLabelKey = so.GPUWorkerNodeLabelKey
	config.MIGWorkerNodeLabelKey = so.MIGWorkerNodeLabelKey
}
