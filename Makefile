# Two entry points: `make plan` (the main job) and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev

.PHONY: plan plan-check test validate lint typecheck bench calibrate native clean e2e e2e-build e2e-apply e2e-prometheus

$(VENV)/.installed: pyproject.toml
	@echo "first run: creating $(VENV) and installing gpuscale with its dependencies (Pulumi, pydantic, numpy, matplotlib; a few minutes)..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@
	@echo "installed into $(VENV)"

# The simulator's request path compiled by mypyc (gpuscale/sim/native.py): build/sim-native/<digest of the sources>/,
# loaded only when it matches the source in the tree, so an edit runs interpreted until this rebuilds it (a no-op when
# the digest's build exists). Never fails: without a C compiler the simulator runs interpreted (same results, slower).
NATIVE_SRC := $(wildcard gpuscale/sim/*.py)
NATIVE_STAMP := build/sim-native/.stamp
$(NATIVE_STAMP): $(VENV)/.installed $(NATIVE_SRC)
	@echo "compiling the simulator's request path with mypyc (about a minute)..."
	$(BIN)/python -c 'from gpuscale.sim import native; native.main(["build"])'
	@mkdir -p $(dir $@) && touch $@

native: $(NATIVE_STAMP)

# The dev plan is committed; every other stack's plan has its own git-ignored folder, so no run overwrites the dev plan.
PLAN_OUT = $(if $(filter dev,$(STACK)),outputs/skill-gpu-autoscaler-plan.md,outputs/$(STACK)/skill-gpu-autoscaler-plan.md)
# The committed dev plan must not depend on whether Go is installed, so it leaves out the real KAI Scheduler's verdict
# (`gpuscale schedule --stack dev`); every other stack's plan quotes it when Go is there.
PLAN_SCHEDULE = $(if $(filter dev,$(STACK)),--no-schedule,)
# What bench/goal_table.py measured (committed generated data); the plan quotes the stack's rows.
GOAL_TABLE = bench/results/goal_table.json

# The main job: validate, synth, simulate and write $(PLAN_OUT) for $(STACK); work files go to out/$(STACK)/ (ignored).
# The runs come from the simulator's registry (`gpuscale simulate --plan-scenarios --stack`: scenario, model, file stem per
# line; a scenario the plan quotes per model has a line per model), not from a list here.
plan: $(VENV)/.installed $(NATIVE_STAMP)
	$(BIN)/gpuscale validate --stack $(STACK)
	$(BIN)/gpuscale synth --stack $(STACK) --out out/$(STACK)/synth
	$(BIN)/gpuscale simulate --plan-scenarios --stack $(STACK) > out/$(STACK)/plan-runs.txt
	while read sc model stem; do \
		echo "simulating $$sc on $$model (up to a few minutes)..."; \
		$(BIN)/gpuscale simulate --stack $(STACK) --scenario $$sc --model $$model --json out/$(STACK)/sim/$$stem.json || exit 1; \
	done < out/$(STACK)/plan-runs.txt
	$(BIN)/gpuscale plan --stack $(STACK) --synth out/$(STACK)/synth --sim-dir out/$(STACK)/sim --out $(PLAN_OUT) $(PLAN_SCHEDULE) \
		$(if $(wildcard $(GOAL_TABLE)),--goal-table $(GOAL_TABLE),)

# CI: the committed dev plan is what `make plan` writes today (the tests check the plan's shape on short simulations)
plan-check: $(VENV)/.installed $(NATIVE_STAMP)
	$(MAKE) plan STACK=dev PLAN_OUT=out/plan-check/skill-gpu-autoscaler-plan.md
	diff -u outputs/skill-gpu-autoscaler-plan.md out/plan-check/skill-gpu-autoscaler-plan.md \
		|| { echo "outputs/skill-gpu-autoscaler-plan.md is stale: run make plan and commit it" >&2; exit 1; }

# actionlint checks the PR workflow in the tests; built from the Go module proxy when Go is there, skipped otherwise
ACTIONLINT_VERSION := v1.7.12
.tools/actionlint:
	@if command -v go >/dev/null; then \
		echo "building actionlint $(ACTIONLINT_VERSION) (Go module proxy; once)"; \
		GOBIN=$(CURDIR)/.tools go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION); \
	else echo "go not found: the actionlint test will skip"; fi

test: $(VENV)/.installed .tools/actionlint $(NATIVE_STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadscope -q

validate: $(VENV)/.installed
	for s in dev staging prod; do $(BIN)/gpuscale validate --stack $$s || exit 1; done

lint: $(VENV)/.installed
	$(BIN)/ruff check gpuscale components infra tests examples bench e2e

typecheck: $(VENV)/.installed
	$(BIN)/mypy gpuscale components examples e2e

bench: $(VENV)/.installed $(NATIVE_STAMP)
	$(BIN)/python bench/synth_bench.py
	$(BIN)/python bench/sim_bench.py

# The performance model against published points, fit and held-out sets (seconds); writes bench/results/calibration.json
# and renders it into docs/simulator.md (Calibration)
calibrate: $(VENV)/.installed
	$(BIN)/python bench/calibration.py --json bench/results/calibration.json --docs > /dev/null

# The real-controllers tier (README "Running the real controllers"): builds each pinned controller once per version
# from the Go module proxy into $(GPUSCALE_E2E_CACHE) (default ~/.cache/gpuscale-e2e), then runs tests/e2e inside a
# private network namespace with only lo (unshare -n), so everything listens and connects on 127.0.0.1 only.
E2E_NETNS = unshare -n -- sh -c 'ip link set lo up && exec "$$@"' e2e-netns

e2e-prometheus:
	@command -v prometheus >/dev/null 2>&1 || { \
		echo "installing Debian's prometheus package (Prometheus and promtool)"; \
		$(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -qq prometheus; }

e2e-build: $(VENV)/.installed
	$(BIN)/python -m e2e.build

# --durations: each scenario's and each setup's time in the log (the KEDA scenarios run side by side, e2e/lanes.py:
# the first KEDA test's setup holds them all)
e2e: e2e-build e2e-prometheus
	GPUSCALE_E2E=1 $(E2E_NETNS) $(BIN)/python -m pytest tests/e2e -p no:cacheprovider -q --durations=12

# Server-side apply every object that the --stack-file emits to a real kube-apiserver with the pinned CRDs; exit 1 on any
# rejection, warning or change on re-apply: make e2e-apply STACK_FILE=stacks/Pulumi.prod.yaml
e2e-apply: $(VENV)/.installed
	@test -n "$(STACK_FILE)" || { echo "usage: make e2e-apply STACK_FILE=stacks/Pulumi.prod.yaml" >&2; exit 2; }
	$(BIN)/python -m e2e.build etcd kubernetes
	$(E2E_NETNS) $(BIN)/python -m e2e.acceptance --stack-file $(STACK_FILE)

# The real Pulumi engine (README "Deploying with Pulumi", "Running it through the real engine"): builds the Pulumi CLI
# and its Kubernetes provider once per version beside the controllers, starts etcd, kube-apiserver and
# kube-controller-manager, and runs tests/e2e_pulumi (up, preview, the policy pack, destroy; synth vs preview for every
# shipped stack) in the private network namespace; out/e2e/pulumi-report.json
.PHONY: e2e-pulumi
e2e-pulumi: $(VENV)/.installed
	$(BIN)/python -m e2e.build etcd kubernetes
	$(BIN)/python -m e2e.pulumi_engine build
	GPUSCALE_E2E_PULUMI=1 $(E2E_NETNS) $(BIN)/python -m pytest tests/e2e_pulumi -p no:cacheprovider -q --durations=8

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
