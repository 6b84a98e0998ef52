"""The Pulumi program's edge, as ``pulumi up`` runs ``infra/__main__.py``: the stack's config in, the platform out,
every refusal a ``pulumi.RunError`` (``pulumi-language-python-exec`` logs ``str(e)`` of one and a traceback for any
other exception, pulumi/pulumi ``sdk/python/cmd/pulumi-language-python-exec``)."""

from __future__ import annotations

import json
import runpy
from collections.abc import Iterator

import pulumi
import pytest

from gpuscale.program import assume_roles, misspelt_namespaces
from tests.components.support import one, run, stack_config
from tests.conftest import REPO
from tests.specs import small_raw

PROGRAM = REPO / "infra" / "__main__.py"
ROLE = "arn:aws:iam::123456789012:role/deployer"


@pytest.fixture
def config() -> Iterator[dict[str, str]]:
    values = {f"gpuscale:{k}": json.dumps(v) for k, v in small_raw().items()}
    yield values


def pulumi_up(values: dict[str, str]) -> list[object]:
    """Run the project's program file as the language host does (``runpy.run_path`` inside the stack)."""
    with stack_config(values):
        return list(run(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"), stack="t"))


def test_the_program_deploys_the_config_with_the_stacks_aws_profile_and_roles(config: dict[str, str]) -> None:
    config["aws:profile"] = "ops"
    config["aws:assumeRoles"] = json.dumps([{"roleArn": ROLE, "sessionName": "ci"}])
    records = pulumi_up(config)
    provider = one(records, "pulumi:providers:aws")  # type: ignore[arg-type]
    assert provider.inputs["profile"] == "ops"
    assert json.loads(provider.inputs["assumeRoles"]) == [{"roleArn": ROLE, "sessionName": "ci"}]


def test_a_config_refusal_is_a_run_error_with_the_yaml_path(config: dict[str, str]) -> None:
    config["gpuscale:topology"] = json.dumps({"zones": ["us-east-1a"], "gpu_pools": [
        {"name": "l40s", "instance_types": ["g6e.xlarge"], "gpu_limit": 16,
         "consolidation_policy": "WhenEmptyOrUnderutilized"}]})
    with pytest.raises(pulumi.RunError) as info:
        pulumi_up(config)
    assert type(info.value) is pulumi.RunError
    message = str(info.value)
    assert message.startswith("stack t: invalid input\n  gpuscale:topology.gpu_pools[0].consolidation_policy: ")
    assert "Traceback" not in message


def test_a_misspelt_namespace_is_named_with_the_key_it_should_be(config: dict[str, str]) -> None:
    config["gpuscle:models"] = config.pop("gpuscale:models")
    with pytest.raises(pulumi.RunError) as info:
        pulumi_up(config)
    lines = str(info.value).splitlines()[1:]
    assert lines[0] == ("  gpuscle:models: unknown config namespace 'gpuscle'; did you mean gpuscale:models? "
                        "(gpuscale reads only gpuscale:* keys)")
    assert any(line.startswith("  gpuscale:models: required key is missing") for line in lines)


def test_a_misspelt_namespace_is_refused_even_when_the_gpuscale_keys_are_complete(config: dict[str, str]) -> None:
    config["GpuScale:models"] = "[]"
    with pytest.raises(pulumi.RunError, match="GpuScale:models: unknown config namespace 'GpuScale'"):
        pulumi_up(config)


def test_other_namespaces_are_not_ours() -> None:
    keys = ["aws:region", "kubernetes:context", "pulumi:tags", "myapp:domain", "gpuscale:models", "scale:x"]
    assert misspelt_namespaces(keys) == []


def test_an_assume_role_with_an_unknown_key_is_refused(config: dict[str, str]) -> None:
    config["aws:assumeRoles"] = json.dumps([{"role": ROLE}])
    with pytest.raises(pulumi.RunError, match=r"aws:assumeRoles\[0\]: needs roleArn and takes only duration, "
                                              r"externalId, policy, policyArns, roleArn"):
        pulumi_up(config)
    assert [r.role_arn for r in assume_roles([{"roleArn": ROLE}])] == [ROLE]
    with pytest.raises(ValueError, match=r"aws:assumeRoles\[0\]\.role_arn: .*not an IAM"):
        assume_roles([{"roleArn": "deployer"}])
