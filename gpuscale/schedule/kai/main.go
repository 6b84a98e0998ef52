// kai-schedule replays KAI Scheduler v0.17.0 over a snapshot of Kubernetes objects, without an API server.
//
// It installs KAI the way the chart does (the operator's own operands render the scheduler ConfigMap and the
// scheduler and podgrouper arguments from the chart's Config and SchedulingShard), groups pods into PodGroups
// with KAI's podgrouper, and runs scheduling sessions with KAI's actions and plugins until a session neither
// binds nor evicts. Between sessions it plays the parts of the binder (a BindRequest binds its pod) and of the
// workload controllers (an evicted pod comes back pending). It writes where every pod ended up and, for those
// still pending, the events and unschedulable explanations KAI recorded.
//
// Usage: kai-schedule --in INPUT.json --out OUTPUT.json [--verbosity N]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"

	"github.com/go-logr/logr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientfeatures "k8s.io/client-go/features"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/actions"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/log"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/metrics"
	"github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/plugins"
)

// kaiVersion is the KAI module version go.mod pins; gpuscale/versions.py pins the chart of the same release.
const kaiVersion = "v0.17.0"

const defaultMaxSessionsPerWave = 8

func main() {
	flags := flag.NewFlagSet("kai-schedule", flag.ContinueOnError)
	in := flags.String("in", "", "input JSON (gpuscale's snapshot)")
	out := flags.String("out", "", "output JSON")
	verbosity := flags.Int("verbosity", 0, "KAI scheduler log verbosity (logs go to stderr)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *in == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "kai-schedule: --in and --out are required")
		os.Exit(2)
	}
	if err := run(*in, *out, *verbosity); err != nil {
		fmt.Fprintf(os.Stderr, "kai-schedule: %v\n", err)
		var inputErr *inputError
		if errors.As(err, &inputErr) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// inputError is a problem with the snapshot rather than with the scheduler.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

func run(inPath, outPath string, verbosity int) error {
	raw, err := os.ReadFile(inPath)
	if err != nil {
		return &inputError{err}
	}
	var input Input
	if err := json.Unmarshal(raw, &input); err != nil {
		return &inputError{fmt.Errorf("%s: %w", inPath, err)}
	}

	disableWatchListClientForFakeReplay()
	logf.SetLogger(logr.Discard())
	if err := log.InitLoggers(verbosity, false); err != nil {
		return err
	}
	defer func() {
		if syncErr := log.InfraLogger.Sync(); syncErr != nil && !errors.Is(syncErr, syscall.EINVAL) &&
			!errors.Is(syncErr, syscall.ENOTTY) {
			fmt.Fprintf(os.Stderr, "kai-schedule: flush log: %v\n", syncErr)
		}
	}()
	metrics.InitMetrics("kai")
	actions.InitDefaultActions()
	plugins.InitDefaultPlugins()

	inst, err := install(input.Chart)
	if err != nil {
		return &inputError{err}
	}
	output, err := replay(context.Background(), inst, &input)
	if err != nil {
		return err
	}
	encoded, err := json.MarshalIndent(output, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(outPath, append(encoded, '\n'), 0o644)
}

// disableWatchListClientForFakeReplay is cmd/snapshot-tool's workaround, for the same reason: client-go's
// WatchListClient gate (default on since 1.35) hangs informers backed by fake clientsets.
func disableWatchListClientForFakeReplay() {
	featureGates, ok := clientfeatures.FeatureGates().(interface {
		Set(clientfeatures.Feature, bool) error
	})
	if !ok {
		return
	}
	if err := featureGates.Set(clientfeatures.WatchListClient, false); err != nil {
		utilruntime.HandleError(err)
	}
}
