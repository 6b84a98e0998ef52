"""The pinned kubectl against the harness's cluster: server-side apply, reads as JSON, dumps."""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.build import binary
from gpuscale.versions import E2E_KUBERNETES

FIELD_MANAGER = "gpuscale-e2e"


class KubectlError(RuntimeError):
    pass


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def warnings(self) -> list[str]:
        """The API server's warnings (deprecations, unknown fields) kubectl relays on stderr."""
        return [line for line in self.stderr.splitlines() if line.startswith("Warning:")]


@dataclass
class Kubectl:
    kubeconfig: Path
    _context: ssl.SSLContext | None = None

    @property
    def cache_dir(self) -> Path:
        """kubectl's discovery and HTTP cache, beside the kubeconfig: kubectl's default
        (``~/.kube/cache/discovery/<host>_<port>``) is keyed by the address alone, which two clusters in two private
        network namespaces, or two runs in a row, may share with different CRDs."""
        return self.kubeconfig.parent / "kubectl-cache"

    def run(self, args: Sequence[str], *, stdin: str | None = None, check: bool = True,
            timeout_s: float = 120) -> Result:
        cmd = [str(binary(E2E_KUBERNETES, "kubectl")), f"--kubeconfig={self.kubeconfig}",
               f"--cache-dir={self.cache_dir}", *args]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False)
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr.strip()}")
        return result

    def apply(self, objects: Iterable[Mapping[str, Any]], *, check: bool = True, force: bool = True) -> Result:
        """Server-side apply of a list of objects (one ``List``), as one field manager."""
        doc = {"apiVersion": "v1", "kind": "List", "items": [dict(o) for o in objects]}
        args = ["apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "-f", "-", "-o", "json"]
        if force:
            args.insert(2, "--force-conflicts")
        return self.run(args, stdin=json.dumps(doc), check=check)

    def diff(self, obj: Mapping[str, Any]) -> str:
        """What applying ``obj`` (an object or a ``List``) again would change (``kubectl diff --server-side``): empty
        when nothing."""
        result = self.run(["diff", "--server-side", f"--field-manager={FIELD_MANAGER}", "-f", "-"],
                          stdin=json.dumps(dict(obj)), check=False)
        if result.returncode == 0:
            return ""
        if result.returncode == 1:
            return result.stdout or "(differs)"
        raise KubectlError(f"kubectl diff failed ({result.returncode}): {result.stderr.strip()}")

    def read(self, path: str, query: Mapping[str, str] | None = None, *, timeout_s: float = 30) -> Any:
        """GET an API path (``/apis/apps/v1/namespaces/ns/deployments/name``) as JSON over HTTPS with the
        kubeconfig's client certificate: the scenarios' polls, without starting a kubectl process for each (a few
        a second when the KEDA scenarios run side by side on a 2-core machine)."""
        config = yaml.safe_load(self.kubeconfig.read_text(encoding="utf-8"))
        cluster = config["clusters"][0]["cluster"]
        if self._context is None:
            user = config["users"][0]["user"]
            ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
            ctx.load_cert_chain(user["client-certificate"], user["client-key"])
            self._context = ctx
        url = cluster["server"] + path + (f"?{urllib.parse.urlencode(dict(query))}" if query else "")
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s, context=self._context) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            raise KubectlError(f"GET {path}: {exc.code} {exc.read().decode(errors='replace')[:500]}") from exc

    def get(self, resource: str, name: str | None = None, *, namespace: str | None = None,
            all_namespaces: bool = False) -> Any:
        args = ["get", resource, *([name] if name else []), "-o", "json"]
        if namespace:
            args += ["-n", namespace]
        if all_namespaces:
            args.append("-A")
        return json.loads(self.run(args).stdout)

    def items(self, resource: str, *, namespace: str | None = None) -> list[dict[str, Any]]:
        doc = self.get(resource, namespace=namespace, all_namespaces=namespace is None)
        items: list[dict[str, Any]] = doc.get("items", [])
        return items

    def patch(self, resource: str, name: str, patch: Mapping[str, Any], *, namespace: str | None = None,
              kind: str = "merge", subresource: str | None = None) -> None:
        args = ["patch", resource, name, f"--type={kind}", "-p", json.dumps(patch)]
        if namespace:
            args += ["-n", namespace]
        if subresource:
            args += [f"--subresource={subresource}"]
        self.run(args)

    def delete(self, resource: str, name: str, *, namespace: str | None = None) -> None:
        args = ["delete", resource, name, "--ignore-not-found", "--wait=false"]
        if namespace:
            args += ["-n", namespace]
        self.run(args)

    def wait_established(self, crd_names: Iterable[str], timeout_s: float = 120) -> None:
        """Poll until every CRD named is ``Established``. Not ``kubectl wait``: on a CRD whose status has no
        conditions yet (just applied) it fails at once ("``.status.conditions`` accessor error") instead of waiting,
        which the batched CRD install made likely."""
        pending = list(crd_names)
        deadline = time.monotonic() + timeout_s
        while pending:
            pending = [n for n in pending if not any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in self.read(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{n}")
                .get("status", {}).get("conditions") or [])]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise KubectlError(f"CRDs not Established after {timeout_s:.0f} s: {', '.join(pending)}")
            time.sleep(0.5)

    def dump(self, path: Path, resources: Sequence[str]) -> None:
        """``kubectl get <resources> -A -o json`` into ``path`` (the scenario's end state)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        result = self.run(["get", ",".join(resources), "-A", "-o", "json"], check=False)
        if result.returncode != 0:
            raise KubectlError(f"dump of {', '.join(resources)} failed: {result.stderr.strip()}")
        path.write_text(result.stdout, encoding="utf-8")


_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_documents(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document of a file (CRD files may start with a licence comment or ``---``)."""
    with path.open(encoding="utf-8") as fh:  # libyaml's loader when PyYAML has it: the 35 CRDs (3.4 MB) in 4 s, not 27
        return [d for d in yaml.load_all(fh, Loader=_SAFE_LOADER) if isinstance(d, dict)]


def poll(probe: Callable[[], Any], *, timeout_s: float, interval_s: float = 1.0) -> Any:
    """Call ``probe`` until it returns something truthy; return it, or the last value after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    value = probe()
    while not value and time.monotonic() < deadline:
        time.sleep(interval_s)
        value = probe()
    return value
