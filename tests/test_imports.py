"""Imports at the top of modules: none inside a function to dodge an import circle.

import-linter keeps the layers and forbids circles (``[tool.importlinter]`` in pyproject.toml:
"The console's layers", "No import circles"); a function-level import would hide a circle from
it, so every one left in ``balancer/`` and ``console/`` is listed here with why it is not one.
"""

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# (module, function) -> why its imports are inside it.
WHY = {
    ("console/apps.py", "ready"): "Django: models are imported in AppConfig.ready, once the app "
    "registry is ready, never when apps.py is",
    ("console/reports/advisor.py", "replay_window"): "a Spark task: imported by the executor "
    "that runs it, from the job's zipped packages, not by the driver",
}


def function_imports(root: Path) -> dict[tuple[str, str], list[str]]:
    """(module path, function) -> the modules imported inside that function, for every module
    under ``root`` (migrations aside)."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    name = inner.module or "."
                elif isinstance(inner, ast.Import):
                    name = ", ".join(a.name for a in inner.names)
                else:
                    continue
                key = (path.relative_to(root.parent).as_posix(), node.name)
                found.setdefault(key, []).append(name)
    return found


def test_no_import_inside_a_function_but_those_said_why():
    found = {}
    for package in ("balancer", "console"):
        found |= function_imports(ROOT / package)
    unexplained = {k: v for k, v in found.items() if k not in WHY}
    assert unexplained == {}, "move these imports to the top of their module"
    assert set(WHY) <= set(found), "a listed function no longer imports: drop it from WHY"


def test_the_scan_finds_an_import_inside_a_function(tmp_path):
    (tmp_path / "m.py").write_text(
        "import os\n\ndef f():\n    from console import selectors\n    return selectors\n"
    )
    assert function_imports(tmp_path) == {(f"{tmp_path.name}/m.py", "f"): ["console"]}


@pytest.mark.parametrize("package", ["console.selectors", "console.services"])
def test_a_lazy_package_serves_every_name_mypy_reads(package):
    """``console.selectors`` and ``console.services`` import a name's module when it is first
    used (PEP 562); mypy reads their ``TYPE_CHECKING`` imports instead, so both lists must
    agree, and each name must come from the module ``_HOMES`` says."""
    module = importlib.import_module(package)
    path = ROOT / package.replace(".", "/") / "__init__.py"
    typed: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for inner in node.body:
                assert isinstance(inner, ast.ImportFrom)
                for alias in inner.names:
                    typed[alias.asname or alias.name] = inner.module.rsplit(".", 1)[1]
    assert typed == module._HOMES
    assert set(module.__all__) - set(typed) <= {"ConsoleError"}  # imported with the package
    for name, home in typed.items():
        assert getattr(module, name) is getattr(importlib.import_module(f"{package}.{home}"), name)


def test_every_module_of_the_console_is_in_a_layer():
    """The layers contract binds only the modules it names: a new module of ``console/`` left
    out of it could import any other unchecked."""
    import re
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in contracts["contracts"] if c["type"] == "layers"]
    named = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
    modules = {
        f"console.{path.stem}"
        for path in (ROOT / "console").iterdir()
        if path.name != "__init__.py" and (path.suffix == ".py" or (path / "__init__.py").is_file())
    }
    assert modules - named == set(), "put these in a layer of [tool.importlinter]"
    assert named - modules == set(), "these layers name no module"
