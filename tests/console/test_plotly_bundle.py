"""The console's partial Plotly bundle (static/vendor/plotly-fulcrum.min.js, built by `make plotly`
from js/plotly-fulcrum.js): the Python plotly package's plotly.js version, every trace type
the console's modules (static/console/**/*.js) draw and no other, served gzipped under 600 kB."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse
from plotly.offline import get_plotlyjs_version

from console import views

ROOT = Path(settings.BASE_DIR)
BUNDLE = ROOT / "static" / "vendor" / "plotly-fulcrum.min.js"
ENTRY = ROOT / "js" / "plotly-fulcrum.js"
# The console's ES modules: shared/ and one per page under pages/.
CONSOLE_JS = ROOT / "static" / "console"

# Keys that carry a trace's data: an object literal with one of them is a trace (an axis
# {type: "date"}, a shape {type: "line", xref, x0...} or a feed item {type: "quiet"} has none).
TRACE_DATA_KEYS = {"x", "y", "z", "labels", "values", "ids", "parents", "lat", "lon", "r", "theta"}
# The Plotly calls the scan understands: their traces are object literals in a module (restyle,
# update or addTraces could set a type another way: the scan would need to read them).
PLOTLY_CALLS = {"newPlot", "react", "extendTraces", "relayout"}


def bundle_text() -> str:
    return BUNDLE.read_text(encoding="utf-8")


def bundled_traces(text: str) -> set[str]:
    """The trace modules in the bundle, each as plotly.js defines one: {moduleType:"trace",
    name:"bar",...}. esbuild keeps only what the entry requires, so these are what it registers."""
    names = re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', text)
    assert len(names) == text.count('moduleType:"trace"'), "a trace module in another shape"
    return set(names)


# A small JavaScript tokenizer: enough to find object literals and their keys in the modules.
TOKEN = re.compile(
    r"""(?P<space>\s+)|(?P<comment>//[^\n]*|/\*[\s\S]*?\*/)
    |(?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(?P<template>`)
    |(?P<name>[A-Za-z_$][\w$]*)|(?P<number>\d[\w.]*)|(?P<punct>\.\.\.|=>|[^\sA-Za-z_$\d])""",
    re.VERBOSE,
)
REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^") | {"return", "typeof", "=>", None}


def tokens(source: str, name: str = "the script") -> list[tuple[str, str, int]]:
    """(kind, text, line) of every token but spaces and comments. A template literal is one
    "template" token whose ${...} parts are tokenized in place; a regular expression one
    "regex" token (a / where an operand starts)."""
    out: list[tuple[str, str, int]] = []
    i, depth = 0, 0
    templates: list[int] = []  # the brace depth at each open ${ inside a template

    def line() -> int:
        return source.count("\n", 0, i) + 1

    while i < len(source):
        if templates and source[i] == "}" and depth == templates[-1]:
            templates.pop()
            i += 1
            i = template_rest(source, i, templates, depth, out, line())
            continue
        if source[i] == "/" and (out[-1][1] if out else None) in REGEX_AFTER:
            match = re.compile(r"/(?:\\.|\[(?:\\.|[^\]\\])*\]|[^/\\\n])+/[a-z]*").match(source, i)
            if match:
                out.append(("regex", match.group(), line()))
                i = match.end()
                continue
        match = TOKEN.match(source, i)
        assert match, f"{name} line {line()}: the scan cannot read {source[i : i + 20]!r}"
        kind = match.lastgroup or ""
        if kind == "template":
            i = template_rest(source, match.end(), templates, depth, out, line())
            continue
        if kind == "punct":
            depth += {"{": 1, "}": -1}.get(match.group(), 0)
        if kind not in ("space", "comment"):
            out.append((kind, match.group(), line()))
        i = match.end()
    return out


Token = tuple[str, str, int]


def template_rest(
    source: str, i: int, templates: list[int], depth: int, out: list[Token], line: int
) -> int:
    """Reads a template literal's text from i to its end or its next ${ (then tokenizing
    resumes inside it until the matching }); returns where to go on."""
    while source[i] != "`":
        if source[i] == "\\":
            i += 2
        elif source.startswith("${", i):
            templates.append(depth)
            out.append(("template", "${", line))
            return i + 2
        else:
            i += 1
    out.append(("template", "`", line))
    return i + 1


def object_literals(toks: list[tuple[str, str, int]]):
    """Each {...} that reads as an object literal, as ({key: value tokens}, line): its body split
    at its top-level commas, every part a `key: value`, a shorthand `key` or a `...spread`.
    Anything else (a block of statements) is skipped."""
    for start, (_, text, line) in enumerate(toks):
        if text != "{":
            continue
        parts: list[list[tuple[str, str, int]]] = [[]]
        depth, i = 0, start + 1
        while depth > 0 or toks[i][1] != "}":
            kind, text, _ = toks[i]
            if kind == "punct":  # a template's ${ closes with no token: it counts for nothing
                depth += {"{": 1, "(": 1, "[": 1, "}": -1, ")": -1, "]": -1}.get(text, 0)
            if depth == 0 and text == ",":
                parts.append([])
            else:
                parts[-1].append(toks[i])
            i += 1
        props: dict[str, list[tuple[str, str, int]]] = {}
        for n, part in enumerate(p for p in parts if p):
            if part[0][1] == "...":
                props[f"...{n}"] = part[1:]
            elif len(part) == 1 and part[0][0] == "name":
                props[part[0][1]] = part
            elif len(part) > 2 and part[0][0] in ("name", "string") and part[1][1] == ":":
                props[part[0][1].strip("\"'")] = part[2:]
            else:
                break
        else:
            if props:
                yield props, line


def drawn_trace_types(source: str, name: str = "the script") -> set[str]:
    """The trace types a module draws: each object literal with a data key is a trace, of its
    "type" (a literal, every literal a computed one can take, or a name's const/let initialiser)
    or scatter, Plotly's default."""
    toks = tokens(source, name)
    objects = list(object_literals(toks))
    # Every `type:` in the source is a property of an object the scan read.
    typed = sum(1 for props, _ in objects if "type" in props)
    assert typed == len(re.findall(r"\btype\s*:", code_of(toks))), f"{name}: the scan missed one"
    drawn: set[str] = set()
    for props, line in objects:
        if not TRACE_DATA_KEYS & props.keys():
            continue
        if "type" not in props:
            drawn.add("scatter")
            continue
        value = props["type"]
        literals = [t[1].strip("\"'") for t in value if t[0] == "string"]
        if not literals and len(value) == 1 and value[0][0] == "name":
            literals = initialiser_literals(toks, value[0][1])
        assert literals, f"{name} line {line}: a trace whose type the scan cannot tell"
        drawn.update(literals)
    return drawn


def code_of(toks: list[tuple[str, str, int]]) -> str:
    """The code again from its tokens, strings and regular expressions blanked: where to count
    `type:` properties."""
    literal = ("string", "regex", "template")
    return " ".join('""' if kind in literal else text for kind, text, _ in toks)


def initialiser_literals(toks: list[tuple[str, str, int]], name: str) -> list[str]:
    """The string literals of `const|let|var <name> = ...;` (every such declaration)."""
    literals: list[str] = []
    for i in range(len(toks) - 2):
        declared = [text for _, text, _ in toks[i : i + 3]]
        if declared[0] in ("const", "let", "var") and declared[1:] == [name, "="]:
            j = i + 3
            while j < len(toks) and toks[j][1] != ";":
                if toks[j][0] == "string":
                    literals.append(toks[j][1].strip("\"'"))
                j += 1
    return literals


def test_the_bundle_is_the_python_plotly_packages_plotly_js_version():
    expected = get_plotlyjs_version()
    text = bundle_text()
    # plotly.js's banner heads the file; its src/version.js is compiled in as X.version="...".
    assert re.match(r"/\*\*\n\* plotly\.js v(\S+)\n", text).group(1) == expected
    assert set(re.findall(r'[\w$]\.version="(\d+\.\d+\.\d+[^"]*)"', text)) == {expected}
    # The pin it is built from, in package.json and the lock.
    package = json.loads((ROOT / "package.json").read_text())
    assert package["devDependencies"]["plotly.js"] == expected
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/plotly.js"]["version"] == expected


def test_the_bundle_registers_every_trace_type_the_console_draws_and_no_other():
    modules = sorted(CONSOLE_JS.rglob("*.js"))
    assert len(modules) > 1, f"no module under {CONSOLE_JS}"
    drawn: set[str] = set()
    for module in modules:
        source = module.read_text(encoding="utf-8")
        assert set(re.findall(r"\bPlotly\.(\w+)", source)) <= PLOTLY_CALLS, module
        drawn |= drawn_trace_types(source, str(module.relative_to(ROOT)))
    # Every chart is drawn by the modules: no template calls Plotly itself.
    for template in (ROOT / "templates").rglob("*.html"):
        assert "Plotly." not in template.read_text(encoding="utf-8"), template
    bundled = bundled_traces(bundle_text())
    assert drawn <= bundled, f"not in the bundle: {sorted(drawn - bundled)} (js/plotly-fulcrum.js)"
    # plotly.js's core registers scatter whatever the entry says; nothing else unused.
    assert bundled == drawn | {"scatter"}
    # And the committed bundle is the entry's: built again after every change to it.
    entry = set(re.findall(r"require\('plotly\.js/lib/(\w+)'\)", ENTRY.read_text()))
    assert entry - {"core"} == bundled, "js/plotly-fulcrum.js changed: make plotly"


def test_the_scan_tells_traces_from_axes_shapes_and_feed_items_and_reads_computed_types():
    source = """
      const kind = flat ? "bar" : "treemap";
      Plotly.newPlot(gd, [{x: [1], y: [2], mode: "lines"}, {type: kind, labels, parents, values},
        {type: "heatmap", z: `${a}/{b}`.split("/")}],
        {xaxis: {type: "date"}, shapes: [{type: "line", xref: "x", x0: 0, y0: 1}]});
      feed.unshift({type: "quiet", count: 1}); const re = /[{"]/g; // {type: "pie", x: 1}
      function f() { return {type: open ? "box" : "violin", y}; }
    """
    assert drawn_trace_types(source) == {"scatter", "bar", "treemap", "heatmap", "box", "violin"}
    with pytest.raises(AssertionError, match="line 2: a trace whose type"):
        drawn_trace_types("\nPlotly.react(gd, [{type: kinds[i], x}]);")


def test_plotly_is_served_gzipped_under_600_kb_and_whole_without_gzip(client):
    url = reverse("plotly-js")
    assert re.fullmatch(r"/vendor/plotly-[0-9a-f]{12}\.min\.js", url)
    raw = BUNDLE.read_bytes()
    zipped = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert zipped.status_code == 200
    assert zipped["Content-Encoding"] == "gzip"
    assert len(zipped.content) <= 600_000
    assert gzip.decompress(zipped.content) == raw
    plain = client.get(url)  # a browser that asks for no gzip
    assert "Content-Encoding" not in plain
    assert plain.content == raw
    for response in (zipped, plain):
        assert response["Content-Type"] == "application/javascript; charset=utf-8"
        assert "max-age=86400" in response["Cache-Control"]
        assert "Accept-Encoding" in response["Vary"]


def test_a_missing_bundle_says_how_to_get_it_back(monkeypatch, tmp_path):
    monkeypatch.setattr(views, "PLOTLY_BUNDLE", tmp_path / "plotly-fulcrum.min.js")
    with pytest.raises(ImproperlyConfigured, match=r"is missing: .*make plotly"):
        views.plotly_bundle.__wrapped__()
