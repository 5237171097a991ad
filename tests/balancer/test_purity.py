"""The core stays pure: balancer/ imports no framework (STYLE.md dependency direction)."""

import ast
from pathlib import Path

FORBIDDEN = {"django", "rest_framework", "channels", "celery", "pyspark", "console", "daphne"}
ROOT = Path(__file__).resolve().parents[2] / "balancer"


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_balancer_imports_no_framework():
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN)
        for path in ROOT.rglob("*.py")
        if imported_roots(path) & FORBIDDEN
    }
    assert offenders == {}


def test_spark_job_imports_no_django():
    job = ROOT.parent / "console" / "reports" / "jobs.py"
    assert not imported_roots(job) & {"django", "rest_framework", "channels", "celery"}
