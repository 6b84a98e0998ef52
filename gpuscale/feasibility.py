"""Every check that needs derived numbers, in one pipeline: feasibility (sizing), then the emitted objects (cross-layer).

The spec's own validators are structural (types, ranges, names, references). What depends on how a model maps onto
GPUs, queues and node pools is checked here, after sizing, so the spec never imports sizing. ``checked_sizing`` is
what every entry point calls (the CLI, the stack-file loader, ``InferencePlatform``): a spec it accepts can be sized,
placed and emitted; one it refuses raises ``Problems``, each with the YAML path of the value to change.
"""

from __future__ import annotations

import math

from gpuscale import cross_layer, perf, sizing, versions
from gpuscale.first_answer import first_answer_problems
from gpuscale.guardrails import consolidation
from gpuscale.guardrails import headroom as headroom_rule
from gpuscale.manifests import karpenter, placeholder
from gpuscale.manifests.namespaces import namespace_problem
from gpuscale.problems import Problem, Problems
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.teams import UNLIMITED

_last: tuple[PlatformSpec, sizing.PlatformSizing] | None = None
"""The spec checked last and its sizing: the stack loader and the CLI check the same (frozen) spec object once."""


def checked_sizing(spec: PlatformSpec) -> sizing.PlatformSizing:
    """Sizing of a spec that is feasible and whose layers agree; ``Problems`` (with paths) otherwise."""
    global _last
    if _last is not None and _last[0] is spec:
        return _last[1]
    sized = _checked_sizing(spec)
    _last = (spec, sized)
    return sized


def _checked_sizing(spec: PlatformSpec) -> sizing.PlatformSizing:
    problems = feasibility(spec)
    if problems:
        raise Problems(problems)
    try:
        sized = sizing.size_platform(spec)
    except sizing.SizingError as exc:  # feasibility checked every shape; this is a model sizing cannot place
        names = [m.name for m in spec.models]
        where = f"models[{names.index(exc.model)}].{exc.path}" if exc.model in names else "models"
        raise Problems([Problem(where, str(exc))]) from None
    answers = {m.model: m.front_door.first_answer for m in sized.models if m.front_door is not None}
    problems = [*_consolidation(spec, sized), *_peak_is_carried(spec, sized), *_placeholder_limits(spec, sized), *first_answer_problems(spec, answers), *cross_layer.check_platform(spec, sized)]
    if problems:
        raise Problems(problems)
    return sized


def feasibility(spec: PlatformSpec) -> list[Problem]:
    """What sizing finds impossible or unsafe: AMI releases, placement, queue quotas, gangs, KV transfer, workload
    namespaces, an EFA pool in a region without an EKS image registry."""
    return [*_ami_releases(spec), *_placement(spec), *_quotas(spec), *_gangs(spec), *_kv_transfer(spec), *_namespaces(spec),
            *karpenter.efa_region_problems(spec)]


def _ami_releases(spec: PlatformSpec) -> list[Problem]:
    """Every pinned al2023 release must be a real amazon-eks-ami release that built the NVIDIA AMI for the cluster's
    Kubernetes minor: Karpenter resolves the alias to one SSM parameter per minor, finds none otherwise, and no node ever
    launches (``gpuscale/upstream/eks_ami_releases.tsv``; Bottlerocket and ``@latest`` aliases are not checked here)."""
    problems: list[Problem] = []
    known = versions.eks_ami_releases()
    k8s = spec.environment.kubernetes_version
    fit = [r for r, minors in known.items() if minors is not None and k8s in minors]
    for j, pool in enumerate(spec.topology.gpu_pools):
        family, release = pool.ami_alias.partition("@")[0], versions.ami_release(pool.ami_alias)
        if family != "al2023" or release == "latest":
            continue
        at = f"topology.gpu_pools[{j}].ami_alias"
        if release not in known:
            problems.append(Problem(at, (
                f"{pool.ami_alias}: {release} is not an amazon-eks-ami release (Karpenter would find no SSM parameter and "
                f"launch no node); releases for Kubernetes {k8s}: {', '.join(fit[-3:])} (newest {versions.EKS_AL2023_AMI_ALIAS})"
            )))
        elif known[release] is None:
            problems.append(Problem(at, (
                f"{pool.ami_alias}: release {release} has no CHANGELOG entry, so whether it built the NVIDIA AMI for "
                f"Kubernetes {k8s} is unknown; pin one of {', '.join(fit[-3:])}, or confirm the SSM parameter with "
                "`gpuscale versions --check-aws` and record it in gpuscale/upstream/eks_ami_releases.tsv"
            )))
        elif k8s not in known[release]:  # type: ignore[operator]
            problems.append(Problem(at, (
                f"{pool.ami_alias}: release {release} built AMIs for Kubernetes {', '.join(sorted(known[release], key=versions.minor))} "  # type: ignore[arg-type]
                f"but not {k8s} (environment.kubernetes_version): Karpenter finds no AMI and launches no node. "
                f"Use {', '.join(fit[-3:])}"
            )))
    return problems


def _kv_transfer(spec: PlatformSpec) -> list[Problem]:
    """Disaggregated serving moves each prompt's KV cache over the network before decode starts: refuse it where the
    transfer of a p99 prompt alone takes more than ``KV_TRANSFER_TTFT_SHARE`` of the TTFT budget."""
    problems: list[Problem] = []
    for i, m in enumerate(spec.models):
        if m.serving.mode != "disaggregated":
            continue
        shape = _shape(spec, i)
        if shape is None:
            continue
        pool = spec.topology.pool(m.node_pool)
        seconds = sizing.kv_transfer_s(m, pool, shape)
        budget = sizing.KV_TRANSFER_TTFT_SHARE * m.slo.ttft_p99_s
        if seconds > budget:
            inst = next(it for it in pool.instances if it.name == shape.instance_type)
            link_gbps = round(sizing.kv_link_bytes_per_s(pool, shape) * 8 / 1e9, 1)
            problems.append(Problem(f"models[{i}].serving.mode", (
                f"disaggregated {m.name}: moving the KV cache of a p99 prompt ({m.workload.prompt_tokens.p99:,} tokens x "
                f"{perf.kv_bytes_per_token(m.architecture):,} B) from prefill to decode takes {seconds:.2f} s at "
                f"line rate ({link_gbps:g} Gbit/s: the replica's {shape.gpus} GPU(s) x {inst.name}'s "
                f"{inst.network_gbps:g} Gbit/s per {inst.gpus_per_node} GPUs), more "
                f"than {sizing.KV_TRANSFER_TTFT_SHARE:.0%} of the {m.slo.ttft_p99_s:g} s TTFT p99 budget. Serve it "
                "aggregated (serving.mode: aggregated), or use a pool with more network bandwidth (EFA)"
            )))
    return problems


def _namespaces(spec: PlatformSpec) -> list[Problem]:
    """Model namespaces are DNS-1123 labels outside the namespaces gpuscale's controllers run in."""
    return [
        Problem(f"models[{i}].serving.namespace", problem)
        for i, m in enumerate(spec.models)
        if (problem := namespace_problem(m.serving.namespace))
    ]


def _shape(spec: PlatformSpec, index: int) -> sizing.ReplicaShape | None:
    m = spec.models[index]
    try:
        return sizing.replica_shape(m, spec.topology.pool(m.node_pool))
    except sizing.SizingError:
        return None


def _placement(spec: PlatformSpec) -> list[Problem]:
    problems: list[Problem] = []
    for i, m in enumerate(spec.models):
        where = f"models[{i}]"
        pool = spec.topology.pool(m.node_pool)
        try:
            shape = sizing.replica_shape(m, pool)
        except sizing.SizingError as exc:
            problems.append(Problem(f"{where}.{exc.path}", str(exc)))
            continue
        if not shape.fits_nvlink_domain and not m.parallelism.allow_tensor_parallel_over_pcie:
            domain = max(it.nvlink_domain_gpus for it in pool.instances)
            problems.append(Problem(
                f"{where}.parallelism.tensor_parallel_size",
                f"TP group of {shape.tensor_parallel_size} GPUs is wider than one NVLink domain on "
                f"{shape.instance_type} ({domain} GPU{'s' if domain > 1 else ''}); every layer would all-reduce "
                "over PCIe/network. Use TP <= the domain with pipeline_parallel_size for the rest, or set "
                "allow_tensor_parallel_over_pcie: true",
            ))
    return problems


def _consolidation(spec: PlatformSpec, sized: sizing.PlatformSizing) -> list[Problem]:
    """The consolidation rule with what the spec alone cannot know: each pool's slowest cold start, as sizing computed
    it (``ModelSizing.cold_start``), raises its floor. The spec validator already applied it with the 1h floor."""
    problems: list[Problem] = []
    for j, pool in enumerate(spec.topology.gpu_pools):
        slowest = sizing.slowest_cold_start(spec, sized, pool.name)
        if slowest is None:
            continue  # no model on the pool: the spec's 1h floor is all there is
        found = consolidation.breaches(
            consolidation.SPEC, pool=pool.name, policy=pool.consolidation_policy, after=pool.consolidate_after,
            after_s=pool.consolidate_after_s, cold_start_s=slowest[1], cold_start_of=slowest[0],
            acknowledged=pool.acknowledge_underutilized_consolidation_evicts_inference,
        )
        problems.extend(Problem(f"topology.gpu_pools[{j}].{consolidation.SPEC.name(field)}", msg) for field, msg in found)
    return problems


def _peak_is_carried(spec: PlatformSpec, sized: sizing.PlatformSizing) -> list[Problem]:
    """A workload whose peak needs more replicas than the stack's limits allow is refused with the numbers."""
    problems: list[Problem] = []
    for i, m in enumerate(spec.models):
        ms = sized.model(m.name)
        gpus = ms.shape.gpus
        for rs in ms.roles:
            if rs.replicas_at_peak <= rs.max_replicas:
                continue
            if m.autoscaling.role(rs.role).max_replicas is not None:
                cap = f"autoscaling.{rs.role}.max_replicas is {rs.max_replicas}"
                fix = f"autoscaling.{rs.role}.max_replicas"
            else:
                # the bound that sets the derived ceiling (sizing.gpu_bounds), with the roles it is shared with
                cap = f"its share of the GPU bounds ({rs.max_replicas_why}) leaves room for {rs.max_replicas}"
                fix = "the queue's and the pool's GPU limits"
            # the load is not proportional to rps (queueing headroom): solve the role's own signal for it
            carried = _down(sizing.carried_rps(m, ms, rs, rs.max_replicas))
            problems.append(Problem(
                f"models[{i}].workload.peak_rps",
                f"{m.name}/{rs.role}: peak_rps {m.workload.peak_rps:,g} needs {rs.replicas_at_peak:,} replicas x {gpus} "
                f"GPU(s) = {rs.replicas_at_peak * gpus:,} GPUs (${rs.replicas_at_peak * gpus * ms.usd_per_gpu_hour:,.0f}/h) "
                f"but {cap}: the stack can carry about {carried:,g} rps. Lower peak_rps or raise {fix}",
            ))
    return problems


def _down(x: float, digits: int = 3) -> float:
    """``x`` rounded down to ``digits`` significant digits: a rate the refusal states must really be carried."""
    if x <= 0:
        return 0.0
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(x)))
    return math.floor(x * scale * (1 + 1e-12)) / scale


def _quotas(spec: PlatformSpec) -> list[Problem]:
    problems: list[Problem] = []
    pool_gpus = sum(p.gpu_limit for p in spec.topology.gpu_pools)
    for j, top in enumerate(spec.teams):
        if top.gpu_limit != UNLIMITED and top.gpu_limit > pool_gpus:
            problems.append(Problem(
                f"teams[{j}].gpu_limit",
                f"queue {top.name}: gpu_limit {top.gpu_limit:g} is above every GPU the node pools may run "
                f"({' + '.join(f'{p.name} {p.gpu_limit}' for p in spec.topology.gpu_pools)} = {pool_gpus}); "
                f"use at most {pool_gpus}, or -1 for no limit of its own",
            ))
    quota = sum(q.gpu_quota for q in spec.teams)
    if quota > pool_gpus:
        parts = " + ".join(f"{q.name} {q.gpu_quota:g}" for q in spec.teams)
        problems.append(Problem(
            "teams",
            f"top-level GPU quotas ({parts} = {quota:g}) exceed the GPU node pools' limits "
            f"({' + '.join(f'{p.name} {p.gpu_limit}' for p in spec.topology.gpu_pools)} = {pool_gpus}); "
            "a quota the nodes can never provide is a promise KAI cannot keep",
        ))
    # warm minimums must fit every bound they count against (the bounds sizing shares ceilings by)
    index = {m.name: i for i, m in enumerate(spec.models)}
    warm: dict[sizing.RoleKey, int] = {}
    for i, m in enumerate(spec.models):
        shape = _shape(spec, i)
        for role in m.serving.roles:
            warm[(m.name, role)] = sizing.default_min_replicas(m, role) * shape.gpus if shape is not None else 0
    for bound in sizing.gpu_bounds(spec):
        need = sizing.bound_usage(bound, warm)
        if need <= bound.gpus:
            continue
        parts = " + ".join(f"{name}/{role} {warm[(name, role)]}" for name, role in bound.roles if warm[(name, role)])
        path = (f"topology.gpu_pools[{_pool_index(spec, bound.name)}].gpu_limit" if bound.kind == "pool_gpu_limit"
                else f"{_queue_path(spec, bound.name)}.{bound.kind}")
        first = next((k for k in bound.roles if warm[k]), bound.roles[0])
        problems.append(Problem(path, (
            f"warm minimum replicas need {parts} = {need} GPUs, above {bound.label}; they would stay Pending. Raise the "
            f"bound or lower models[{index[first[0]]}].autoscaling.{first[1]}.min_replicas"
        )))
    return problems


def _gangs(spec: PlatformSpec) -> list[Problem]:
    """A replica is one gang (KAI places all its pods or none): it must fit its queue chain and its pool whole."""
    problems: list[Problem] = []
    for i, m in enumerate(spec.models):
        shape = _shape(spec, i)
        if shape is None:
            continue
        pool = spec.topology.pool(m.node_pool)
        gang = f"one replica of {m.name} is a gang of {shape.pods} pod(s) / {shape.gpus} GPUs"
        chain = spec.queue_chain(m.queue)
        leaf = chain[-1]
        if not leaf.preemptible:
            # non-preemptible pods run in quota only, checked against the leaf and every ancestor
            short = [q for q in chain if q.gpu_quota < shape.gpus]
            if short:
                names = ", ".join(f"{q.name} gpu_quota {q.gpu_quota:g}" for q in short)
                problems.append(Problem(
                    f"models[{i}].queue",
                    f"{gang} but queue {m.queue} is non-preemptible (runs in quota only) and {names} "
                    f"{'is' if len(short) == 1 else 'are'} below {shape.gpus}: no replica can ever start. Raise the "
                    "quota, or use a smaller replica (FP8, fewer GPUs)",
                ))
        capped = [q for q in chain if q.gpu_limit != UNLIMITED and q.gpu_limit < shape.gpus]
        if capped:
            names = ", ".join(f"{q.name} gpu_limit {q.gpu_limit:g}" for q in capped)
            problems.append(Problem(f"models[{i}].queue", f"{gang} but {names} caps the queue below it: no replica can ever start"))
        if pool.gpu_limit < shape.gpus:
            problems.append(Problem(
                f"models[{i}].node_pool",
                f"{gang} but node pool {pool.name} may run at most {pool.gpu_limit} GPUs (gpu_limit): Karpenter can "
                "never launch the nodes for one replica",
            ))
    return problems


def _placeholder_limits(spec: PlatformSpec, sized: sizing.PlatformSizing) -> list[Problem]:
    """Placeholder pods KAI could refuse over a queue's limit while Karpenter launches them a node
    (``guardrails.headroom.placeholder_limit_breach``), at the first such model's ``headroom.mode``."""
    by_name = {ms.model: ms for ms in sized.models}
    problems: list[Problem] = []
    queues = {q.name: q for m in spec.models for q in spec.queue_chain(m.queue)}
    for q in queues.values():
        under = [(i, m) for i, m in enumerate(spec.models) if q.name in {c.name for c in spec.queue_chain(m.queue)}]
        serving = sum(r.max_replicas * by_name[m.name].shape.gpus for _, m in under for r in by_name[m.name].roles)
        held = [(i, m.name, r.role, r.headroom.gpus) for i, m in under for r in by_name[m.name].roles
                if placeholder.emits(r.headroom) and r.headroom is not None]
        breach = headroom_rule.placeholder_limit_breach(q.name, q.gpu_limit, serving, [(m, r, g) for _, m, r, g in held])
        if breach:
            problems.append(Problem(f"models[{held[0][0]}].headroom.mode", breach))
    return problems


def _pool_index(spec: PlatformSpec, name: str) -> int:
    return [p.name for p in spec.topology.gpu_pools].index(name)


def _queue_path(spec: PlatformSpec, name: str) -> str:
    """YAML path of a queue in the team tree (``teams[0].children[1]``)."""
    path = ""
    siblings = spec.teams
    for q in spec.queue_chain(name):
        index = next(j for j, s in enumerate(siblings) if s.name == q.name)
        path = f"teams[{index}]" if not path else f"{path}.children[{index}]"
        siblings = q.children
    return path
