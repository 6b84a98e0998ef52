"""``pip install gpuscale`` gives the spec, sizing, builders and components; the CLI's own packages are an extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib

from gpuscale.cli import CLI_EXTRA_MODULES
from tests.conftest import REPO

BLOCK = textwrap.dedent(f"""
    import importlib.abc, sys
    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {CLI_EXTRA_MODULES!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None
    sys.meta_path.insert(0, Absent())
""")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)


def test_base_dependencies_leave_the_cli_packages_to_the_extra() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"])
    assert [m for m in CLI_EXTRA_MODULES if m in base] == []
    extra = " ".join(project["optional-dependencies"]["cli"])
    assert all(m in extra for m in CLI_EXTRA_MODULES)


def test_components_spec_sizing_and_synth_import_without_the_extra() -> None:
    done = _run("""
        import gpuscale, gpuscale.components, gpuscale.feasibility, gpuscale.synth.render
        from gpuscale.feasibility import checked_sizing
        from tests.specs import small_spec
        print(checked_sizing(small_spec()).model("m8b").shape.gpus)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def test_the_command_names_the_extra_when_it_is_missing() -> None:
    done = _run("""
        from gpuscale.cli import main
        main()
    """)
    assert done.returncode == 2
    assert "pip install 'gpuscale[cli]'" in done.stderr
    assert "Traceback" not in done.stderr
