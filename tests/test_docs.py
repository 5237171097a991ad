"""The documentation a newcomer reads: a short README, and every link, path, module and cited
specification in the docs resolving to something in the repository.

Plain pytest: no Django, no database, no network. The documents are README.md and every
Markdown file under docs/ (the specification in docs/spec/ included).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SPEC = ROOT / "docs" / "spec"
README_MAX_LINES = 300

# What a backticked repository path may start with. var/ is left out on purpose: it is made at run
# time (make run, the tests), so the docs name files there that no clone holds.
TOP_DIRS = (
    "balancer",
    "console",
    "tests",
    "templates",
    "static",
    "js",
    "scripts",
    "docs",
    "data",
    "deploy",
    ".ci",
)
TOP_FILES = (
    "Makefile",
    "Procfile",
    "pyproject.toml",
    "package.json",
    "package-lock.json",
    "manage.py",
    "README.md",
)
PACKAGES = ("balancer", "console", "tests")

# Paths the specification quotes from the repositories it was read from, not from this one.
OTHER_REPOSITORIES = {
    "docs/architecture/load_manager_architecture.md": "danube-messaging/danube",
    "docs/admin-api-brokers.md": "apache/pulsar-site",
    "docs/develop-load-manager.md": "apache/pulsar-site",
    "docs/administration-rolling-upgrade.md": "apache/pulsar-site",
    "static/reference/next/pulsar-admin/broker-stats.md": "apache/pulsar-site",
}

# A placeholder, not a path: `run-<id>/`, `date=YYYY-MM-DD/`, `…`.
PLACEHOLDER = re.compile(r"<|>|…|\.\.\.|YYYY|\$")
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
MODULE_RUN = re.compile(r"-m\s+([A-Za-z_][\w.]*)")
DOTTED = re.compile(rf"^(?:{'|'.join(PACKAGES)})(?:\.\w+)+")
DOCS_PATH = re.compile(r"\bdocs/[\w./-]+\.(?:md|png)\b")
SPEC_NAME = re.compile(r"\b([A-Z][A-Z0-9_]*\.md)\b")
# A spec's name and the sections cited after it: `PULSAR.md §3.4, §8` cites 3.4 and 8.
SPEC_SECTION = re.compile(
    r"\b([A-Z][A-Z0-9_]*\.md)`{0,2}((?:\s*(?:[,;]|and)?\s*§\s*\d+(?:\.\d+)*)+)"
)
SECTION_NUMBER = re.compile(r"§\s*(\d+(?:\.\d+)*)")


def documents() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def name(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def code_blocks(text: str) -> Iterator[tuple[int, str]]:
    """(position, text) of every fenced block and every inline code span."""
    for m in FENCE.finditer(text):
        yield m.start(), m.group()
    prose = FENCE.sub(lambda m: " " * len(m.group()), text)
    for m in CODE_SPAN.finditer(prose):
        yield m.start(), m.group(2)


def prose_only(text: str) -> str:
    """The text without code, same length, so that positions still give line numbers."""
    text = FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n`]", "x", m.group()), text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: text only, lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


@cache
def anchors(doc: Path) -> frozenset[str]:
    text = doc.read_text()
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for m in HEADING.finditer(FENCE.sub("", text)):
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def expand(path: str) -> list[str]:
    """`a/{b,c}.py` -> `a/b.py`, `a/c.py`."""
    parts = re.split(r"\{([^}]*)\}", path)
    choices = [p.split(",") if i % 2 else [p] for i, p in enumerate(parts)]
    return ["".join(c) for c in product(*choices)]


def repository_paths(code: str) -> Iterator[str]:
    """Every word of a code block or span that names a file or folder of this repository."""
    for word in code.split():
        word = word.strip("()[],;:'\"").removesuffix(".")
        is_path = word in TOP_FILES or word.startswith(tuple(f"{d}/" for d in TOP_DIRS))
        if is_path and not PLACEHOLDER.search(word):
            yield word


def exists(path: str) -> bool:
    if "*" in path:
        return any(ROOT.glob(path.rstrip("/")))
    return (ROOT / path).exists()


def module_exists(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def names_code(dotted: str) -> bool:
    """`tests.benchmarks.scale` is a module; `balancer.cycle.plan_cycle` is a name in one."""
    return module_exists(dotted) or module_exists(dotted.rpartition(".")[0])


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


def test_every_link_and_image_resolves():
    broken = []
    for doc in documents():
        text = doc.read_text()
        for m in LINK.finditer(prose_only(text)):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            where = f"{name(doc)}:{line_of(text, m.start())}: {target}"
            if not file.exists() or not file.is_relative_to(ROOT):
                broken.append(f"{where} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{where} (no heading #{anchor} in {file.relative_to(ROOT)})")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_every_repository_path_exists():
    missing = []
    for doc in documents():
        text = doc.read_text()
        elsewhere = OTHER_REPOSITORIES if doc.is_relative_to(SPEC) else {}
        for pos, code in code_blocks(text):
            for path in repository_paths(code):
                if path not in elsewhere and not all(exists(p) for p in expand(path)):
                    missing.append(f"{name(doc)}:{line_of(text, pos)}: {path}")
    assert not missing, "paths the docs name that the repository lacks:\n" + "\n".join(missing)


def test_every_module_named_exists():
    """`python -m tests.benchmarks.scale`: that module is there; `balancer.cycle.plan_cycle`: the
    module it names, or the module holding that name, is there."""
    missing = []
    for doc in documents():
        text = doc.read_text()
        for pos, code in code_blocks(text):
            run = {m.group(1) for m in MODULE_RUN.finditer(code)}
            named = {m.group() for w in code.split() if (m := DOTTED.match(w))} - run
            bad = {d for d in run if d.startswith(PACKAGES) and not module_exists(d)}
            bad |= {d for d in named if not names_code(d)}
            missing += [f"{name(doc)}:{line_of(text, pos)}: {d}" for d in sorted(bad)]
    assert not missing, "modules the docs name that the code lacks:\n" + "\n".join(missing)


@cache
def headings(spec: str) -> tuple[str, ...]:
    file = SPEC / spec
    return tuple(m.group(2) for m in HEADING.finditer(file.read_text())) if file.is_file() else ()


def code_lines(pattern: re.Pattern[str]) -> Iterator[tuple[str, int, str]]:
    """(file, line number, line) of every line of the code and tests that ``pattern`` finds (this
    file aside: its paths and names are examples and other repositories', not citations)."""
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            if file == Path(__file__).resolve():
                continue
            for number, line in enumerate(file.read_text().splitlines(), 1):
                if pattern.search(line):
                    yield str(file.relative_to(ROOT)), number, line


def cited_in_code() -> Iterator[tuple[str, int, str]]:
    """Every line of the code and tests that names a spec document."""
    return code_lines(SPEC_NAME)


def test_every_docs_page_the_code_cites_exists():
    """A docstring's `docs/developers/cycle.md § …` leads to a page that is there."""
    missing = [
        f"{file}:{number}: {path}"
        for file, number, line in code_lines(DOCS_PATH)
        for path in DOCS_PATH.findall(line)
        if not (ROOT / path).is_file()
    ]
    assert not missing, "docs pages the code cites that are not there:\n" + "\n".join(missing)


def test_every_spec_document_the_code_cites_is_in_docs_spec():
    """The code cites `PULSAR.md §1` by bare name: each name is the file of that name in
    docs/spec/. README.md aside: the code names other folders' READMEs too
    (`data/traces/README.md`), and `spec README §2` is docs/spec/README.md."""
    first_cited: dict[str, str] = {}
    for file, number, line in cited_in_code():
        for spec in SPEC_NAME.findall(line):
            first_cited.setdefault(spec, f"{file}:{number}")
    missing = [
        f"{spec} (cited at {where})"
        for spec, where in sorted(first_cited.items())
        if spec != "README.md" and not (SPEC / spec).is_file()
    ]
    assert not missing, "cited, but not in docs/spec/:\n" + "\n".join(missing)


def test_every_numbered_section_cited_exists():
    """`PULSAR.md §8.4` in the code or the docs (each of a list: `§8.4, §9`): docs/spec/PULSAR.md
    has a heading 8.4."""
    cites = [(f"{file}:{number}", line) for file, number, line in cited_in_code()]
    for doc in documents():
        if not doc.is_relative_to(SPEC):
            cites += [
                (f"{name(doc)}:{n}", line) for n, line in enumerate(doc.read_text().splitlines(), 1)
            ]
    missing = []
    for where, line in cites:
        for spec, sections in SPEC_SECTION.findall(line):
            for section in SECTION_NUMBER.findall(sections):
                if not any(
                    re.match(rf"{re.escape(section)}[.\s]", h + " ") for h in headings(spec)
                ):
                    missing.append(f"{where}: {spec} §{section}")
    assert not missing, "sections cited that the specification lacks:\n" + "\n".join(missing)
