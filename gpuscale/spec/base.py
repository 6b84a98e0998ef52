"""The base model every spec inherits (frozen, strict, documented) and the value types stack files share.

Every pattern is matched against the whole value (``re.fullmatch``): ``"1h\\n"`` or ``"search-8b\\n"`` is refused, never
accepted because ``$`` also matches before a trailing newline.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import urllib.parse
import zoneinfo
from datetime import UTC, datetime
from typing import Annotated

from croniter import CroniterBadCronError, CroniterBadDateError, croniter
from pydantic import AfterValidator, BaseModel, ConfigDict


class Spec(BaseModel):
    """Frozen, ``extra="forbid"`` base: an unknown key is an error, never silently dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


INT32_MAX = 2**31 - 1
"""Kubernetes ``int32`` fields (replica counts, seconds) cannot hold more."""

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def _dns_label(value: str) -> str:
    if len(value) > 40 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid name: use 1-40 lowercase letters, digits and '-', "
            "starting with a letter (it becomes part of Kubernetes object names)"
        )
    return value


Name = Annotated[str, AfterValidator(_dns_label)]
"""A short DNS-label name; it is embedded in Kubernetes and AWS resource names."""

_RFC1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _namespace(value: str) -> str:
    if len(value) > 63 or not _RFC1123_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a Kubernetes namespace: use 1-63 lowercase letters, digits and '-', starting and ending "
            "with a letter or digit (RFC 1123 label)"
        )
    return value


Namespace = Annotated[str, AfterValidator(_namespace)]
"""A Kubernetes namespace name (RFC 1123 label, at most 63 characters)."""

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes label key (``[prefix/]name``), or None if it is one."""
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"{key!r}: the prefix before '/' must be a DNS subdomain of at most 253 characters (e.g. example.com)"
    if len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (
            f"{key!r} is not a Kubernetes label key: the name (after an optional 'prefix/') is 1-63 letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a Kubernetes label value, or None if it is one (the empty value is valid)."""
    if value and (len(value) > 63 or not _QUALIFIED_NAME.fullmatch(value)):
        return (
            f"{value!r} is not a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.', starting and "
            "ending with a letter or digit"
        )
    return None


def _label_key(key: str) -> str:
    problem = label_key_problem(key)
    if problem:
        raise ValueError(problem)
    return key


def _labels(labels: dict[str, str]) -> dict[str, str]:
    problems = [p for k, v in labels.items() for p in (label_key_problem(k), label_value_problem(v)) if p]
    if problems:
        raise ValueError("; ".join(problems))
    return labels


LabelKey = Annotated[str, AfterValidator(_label_key)]
"""A Kubernetes label key (``[DNS-subdomain/]name``)."""
Labels = Annotated[dict[str, str], AfterValidator(_labels)]
"""Kubernetes labels: valid keys and values."""

_DURATION = re.compile(r"(([0-9]+(s|m|h))+|Never)")
_DURATION_PART = re.compile(r"([0-9]+)(s|m|h)")


def _karpenter_duration(value: str) -> str:
    if parse_duration(value) is None:
        raise ValueError(f"{value!r} is not a duration: write e.g. '30s', '15m', '1h', '1h30m' or 'Never'")
    return value


KarpenterDuration = Annotated[str, AfterValidator(_karpenter_duration)]
"""A Karpenter duration string (``^(([0-9]+(s|m|h))+|Never)$``)."""


def parse_duration(value: str) -> float | None:
    """Seconds in a Karpenter duration (``1h30m``; ``Never`` is infinite), ``None`` if ``value`` is not one."""
    if value == "Never":
        return float("inf")
    if not _DURATION.fullmatch(value):
        return None
    scale = {"s": 1, "m": 60, "h": 3600}
    return float(sum(int(n) * scale[u] for n, u in _DURATION_PART.findall(value)))


def duration_seconds(value: str) -> float:
    """Seconds in a validated Karpenter duration; ``Never`` is infinite."""
    seconds = parse_duration(value)
    if seconds is None:
        raise ValueError(f"{value!r} is not a duration: write e.g. '30s', '15m', '1h', '1h30m' or 'Never'")
    return seconds


# --- cron and time zones: what KEDA's cron scaler and Karpenter's budgets parse (robfig/cron v3) ----------------------

CRON_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
"""Descriptors ``cron.ParseStandard`` accepts and Karpenter's NodePool CRD pattern allows (KEDA's parser does not)."""
_CRON_FIELDS = ("minute", "hour", "day of month", "month", "day of week")
_CRON_NAMES = (
    "", "", "", "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec", "sun|mon|tue|wed|thu|fri|sat",
)


@functools.cache
def _cron_field(index: int) -> re.Pattern[str]:
    """robfig/cron field syntax: lists of ``*``, ``?``, values and ranges, each with an optional ``/step``."""
    value = f"([0-9]+|{_CRON_NAMES[index]})" if _CRON_NAMES[index] else "[0-9]+"
    part = rf"(\*|\?|{value}(-{value})?)(/[0-9]+)?"
    return re.compile(rf"{part}(,{part})*", re.IGNORECASE)


def cron_problem(expr: str, *, descriptors: bool = False) -> str | None:
    """Why ``expr`` is not a 5-field cron expression that fires, or None. ``descriptors`` allows ``@daily`` etc."""
    example = "write 5 fields 'minute hour day-of-month month day-of-week', e.g. '0 8 * * 1-5'"
    if descriptors and expr in CRON_DESCRIPTORS:
        return None
    fields = expr.split()
    if expr != expr.strip() or len(fields) != 5:
        return f"{expr!r} is not a cron expression: {example} (no seconds field, nothing before or after)"
    for i, f in enumerate(fields):
        if not _cron_field(i).fullmatch(f):
            return f"{expr!r}: {_CRON_FIELDS[i]} field {f!r} is not cron syntax (numbers, names, '*', ',', '-', '/')"
    for a, b in re.findall(r"(?<![/0-9])([0-9]+)-([0-9]+)", expr):
        if int(a) > int(b):
            return f"{expr!r}: range {a}-{b} runs backwards (robfig/cron, which KEDA and Karpenter use, refuses it)"
    if re.search(r"(?<![/0-9])7(?![0-9])", fields[4]):
        return f"{expr!r}: day of week is 0-6 (Sunday is 0; robfig/cron refuses 7)"
    try:
        croniter(expr, datetime(2026, 1, 1, tzinfo=UTC), max_years_between_matches=8).get_next(datetime)
    except CroniterBadCronError as exc:
        return f"{expr!r} is not a valid cron expression: {exc}"
    except CroniterBadDateError:
        return f"{expr!r} never fires (no such date, e.g. 30 February): {example}"
    return None


def _cron(expr: str) -> str:
    problem = cron_problem(expr)
    if problem:
        raise ValueError(problem)
    return expr


def _cron_or_descriptor(expr: str) -> str:
    problem = cron_problem(expr, descriptors=True)
    if problem:
        raise ValueError(problem + f"; or one of {', '.join(CRON_DESCRIPTORS)}")
    return expr


CronExpression = Annotated[str, AfterValidator(_cron)]
"""A 5-field cron expression KEDA's cron scaler accepts (robfig/cron ``Minute|Hour|Dom|Month|Dow``)."""
CronSchedule = Annotated[str, AfterValidator(_cron_or_descriptor)]
"""A Karpenter budget schedule: 5 fields or a descriptor such as ``@daily`` (``cron.ParseStandard``, in UTC)."""


@functools.cache
def _time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def _time_zone(name: str) -> str:
    if name not in _time_zones():
        close = [z for z in sorted(_time_zones()) if z.lower() == name.lower() or z.endswith("/" + name)]
        hint = f" (did you mean {', '.join(close[:3])}?)" if close else " (e.g. UTC, Europe/London, America/New_York)"
        raise ValueError(f"{name!r} is not an IANA time zone{hint}")
    return name


TimeZone = Annotated[str, AfterValidator(_time_zone)]
"""An IANA time zone name (``zoneinfo``), as Go's ``time.LoadLocation`` in KEDA reads it."""


# --- AWS and network values -----------------------------------------------------------------------------------------


def _ipv4_cidr(cidr: str) -> str:
    try:
        ipaddress.IPv4Network(cidr)
    except ValueError as exc:
        raise ValueError(f"{cidr!r} is not an IPv4 CIDR such as 203.0.113.0/24: {exc}") from None
    if "/" not in cidr:
        raise ValueError(f"{cidr!r} has no prefix length: write it as a CIDR, e.g. {cidr}/32")
    return cidr


Ipv4Cidr = Annotated[str, AfterValidator(_ipv4_cidr)]
"""An IPv4 network in CIDR notation with no host bits set (``203.0.113.0/24``)."""

_IAM_PRINCIPAL = re.compile(r"arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:(role|user)/([\w+=,.@-]+/)*[\w+=,.@-]{1,128}")


def _iam_principal(arn: str) -> str:
    if not _IAM_PRINCIPAL.fullmatch(arn):
        raise ValueError(
            f"{arn!r} is not an IAM role or user ARN (EKS access entries take arn:aws:iam::<12-digit account>:role/<name> "
            "or :user/<name>; not an assumed-role session ARN)"
        )
    return arn


IamPrincipalArn = Annotated[str, AfterValidator(_iam_principal)]
"""An IAM role or user ARN, the principal an EKS access entry names."""

_URL_HOST = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*")


def _http_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    problem = ""
    if parts.scheme not in ("http", "https"):
        problem = "the scheme must be http:// or https://"
    elif not parts.hostname or not (_URL_HOST.fullmatch(parts.hostname) or _is_ip(parts.hostname)):
        problem = "it needs a host name or address"
    elif any(c.isspace() for c in url):
        problem = "it contains whitespace"
    elif parts.query or parts.fragment:
        problem = "it must not carry a query or fragment (KEDA and prometheus-adapter append /api/v1/query)"
    else:
        try:
            parts.port  # noqa: B018 (raises ValueError on a port outside 0-65535)
        except ValueError:
            problem = "its port is not a number from 1 to 65535"
    if problem:
        raise ValueError(f"{url!r} is not a Prometheus URL: {problem} (e.g. http://prometheus.monitoring.svc:9090)")
    return url


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


HttpUrl = Annotated[str, AfterValidator(_http_url)]
"""An ``http(s)://host[:port][/path]`` URL, kept as the string written."""
