"""No module a person cannot read: at most 800 lines in balancer/, console/ and static/ (the
vendored Plotly bundle and Django's generated migrations aside)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 800


def module_lines(root: Path) -> dict[str, int]:
    """Every Python and JavaScript module under ``root`` (vendor and migrations folders aside)
    -> its number of lines."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".js") or {"vendor", "migrations"} & set(path.parts):
            continue
        out[path.relative_to(ROOT).as_posix()] = len(path.read_text().splitlines())
    return out


def test_no_module_is_over_800_lines():
    sizes: dict[str, int] = {}
    for folder in ("balancer", "console", "static"):
        sizes |= module_lines(ROOT / folder)
    assert len(sizes) > 100  # the scan found the modules
    over = {path: n for path, n in sizes.items() if n > MAX_LINES}
    assert over == {}, f"split these modules (at most {MAX_LINES} lines each)"
