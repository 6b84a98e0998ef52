"""Subnet layout and the kubeconfig builder."""

from __future__ import annotations

import ipaddress
import itertools

import pytest

from gpuscale.manifests import network


def test_slash16_over_three_zones() -> None:
    plan = network.subnet_plan("10.40.0.0/16", ["a", "b", "c"])
    assert [(z.zone, z.private_cidr, z.public_cidr) for z in plan] == [
        ("a", "10.40.0.0/19", "10.40.128.0/22"),
        ("b", "10.40.32.0/19", "10.40.132.0/22"),
        ("c", "10.40.64.0/19", "10.40.136.0/22"),
    ]


@pytest.mark.parametrize(
    ("cidr", "zones"), [("10.0.0.0/16", 1), ("10.0.0.0/16", 2), ("10.0.0.0/20", 6), ("10.0.0.0/20", 8)]
)
def test_subnets_fit_the_vpc_and_never_overlap(cidr: str, zones: int) -> None:
    vpc = ipaddress.IPv4Network(cidr)
    plan = network.subnet_plan(cidr, [f"z{i}" for i in range(zones)])
    nets = [ipaddress.IPv4Network(c) for z in plan for c in (z.private_cidr, z.public_cidr)]
    assert all(n.subnet_of(vpc) for n in nets)
    assert not any(a.overlaps(b) for a, b in itertools.combinations(nets, 2))
    # pods take VPC addresses: private subnets are the big ones
    assert all(
        ipaddress.IPv4Network(z.private_cidr).num_addresses >= 8 * ipaddress.IPv4Network(z.public_cidr).num_addresses
        for z in plan
    )


def test_too_many_zones_is_refused() -> None:
    with pytest.raises(ValueError, match="1 to 8"):
        network.subnet_plan("10.0.0.0/16", [f"z{i}" for i in range(9)])


def test_only_private_subnets_are_discoverable_by_karpenter() -> None:
    private = network.subnet_tags("private", "gpuscale-prod", "us-east-1a", {"team": "x"})
    public = network.subnet_tags("public", "gpuscale-prod", "us-east-1a", {"team": "x"})
    assert private["karpenter.sh/discovery"] == "gpuscale-prod" and private["team"] == "x"
    assert "karpenter.sh/discovery" not in public and public["kubernetes.io/role/elb"] == "1"


def test_nat_gateway_per_zone_in_prod_only() -> None:
    assert network.nat_gateway_zones(["a", "b", "c"], "prod") == ["a", "b", "c"]
    assert network.nat_gateway_zones(["a", "b", "c"], "dev") == ["a"]


def test_kubeconfig_uses_short_lived_tokens_and_holds_no_credential() -> None:
    kc = network.kubeconfig_body("gpuscale-dev", "https://x.eks.amazonaws.com", "Q0E=", "us-west-2")
    (user,) = kc["users"]
    exec_ = user["user"]["exec"]
    assert exec_["command"] == "aws"
    assert exec_["args"] == [
        "eks",
        "get-token",
        "--cluster-name",
        "gpuscale-dev",
        "--region",
        "us-west-2",
        "--output",
        "json",
    ]
    assert set(user["user"]) == {"exec"}  # no token, no client key
    assert kc["clusters"][0]["cluster"] == {
        "server": "https://x.eks.amazonaws.com",
        "certificate-authority-data": "Q0E=",
    }
    assert kc["current-context"] == "gpuscale-dev"


def test_kubeconfig_carries_the_role_and_profile_it_is_given() -> None:
    plain = network.kubeconfig_body("c", "https://x", "Y2E=", "eu-west-1")["users"][0]["user"]["exec"]
    assert "--role-arn" not in plain["args"] and "env" not in plain
    given = network.kubeconfig_body("c", "https://x", "Y2E=", "eu-west-1", role_arn="arn:aws:iam::123456789012:role/d",
                                    profile="ops")["users"][0]["user"]["exec"]
    assert given["args"][-2:] == ["--role-arn", "arn:aws:iam::123456789012:role/d"]
    assert given["env"] == [{"name": "AWS_PROFILE", "value": "ops"}]
