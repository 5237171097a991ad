"""The JSON command line of CLI.md: a document in (stdin or ``--input``), a document out.

Exit 0 on success; bad input exits 2 with ``{"error": {"message", "field"}}`` on standard error
and nothing on standard output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any, NoReturn, TextIO

from balancer import bundles as bundle_ops
from balancer.cycle import plan_cycle
from balancer.cycle.guard import shed_guarded
from balancer.danube.placement import place as danube_place
from balancer.errors import BalancerError
from balancer.hashing import format_hash, topic_hash
from balancer.load import TopicLoad
from balancer.names import PlacementName, ShedderName, SplitAlgorithmName
from balancer.placement.place import place
from balancer.registry import (
    DANUBE_PLACEMENT,
    config_class,
    get_placement_strategy,
    get_shedder,
    get_split_algorithm,
)
from balancer.splitting.conditions import split_check
from balancer.wire import (
    array,
    obj,
    parse_cycle_config,
    parse_hash,
    parse_snapshot,
    parse_topic_loads,
    text,
)

Handler = Callable[[argparse.Namespace, dict[str, Any]], dict[str, Any]]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise BalancerError(message, field="argv")


def _config(doc: dict[str, Any], strategy: str = "") -> Any:
    return config_class(strategy).from_keys(obj(doc.get("config", {}), "config"))


def _state(doc: dict[str, Any]) -> dict[str, Any]:
    return dict(obj(doc.get("state", {}), "state"))


def cmd_hash(args: argparse.Namespace, _doc: dict[str, Any]) -> dict[str, Any]:
    """``hash TOPIC...``."""
    return {"hashes": [{"topic": t, "hash": format_hash(topic_hash(t))} for t in args.topics]}


def cmd_bundles(args: argparse.Namespace, _doc: dict[str, Any]) -> dict[str, Any]:
    """``bundles --count N [--namespace NS]``."""
    boundaries = bundle_ops.initial_boundaries(args.count)
    bundles = bundle_ops.bundles_from_boundaries(args.namespace, boundaries)
    return {
        "boundaries": [format_hash(b) for b in boundaries],
        "bundles": [b.name for b in bundles],
    }


def cmd_lookup(args: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    """``lookup TOPIC --input SNAPSHOT``: the bundle of the topic's namespace it hashes into."""
    snapshot = parse_snapshot(doc)
    namespace = bundle_ops.namespace_of_topic(args.topic)
    ranges = sorted(
        bundle_ops.parse_bundle_name(name).range
        for name in snapshot.bundles
        if name.startswith(namespace + "/") and name.rsplit("/", 1)[0] == namespace
    )
    if ranges:
        boundaries = [r.lower for r in ranges] + [ranges[-1].upper]
    else:
        count = next(
            (
                int(ns.get("bundleCount", 0))
                for ns in array(doc.get("namespaces", []), "namespaces")
                if isinstance(ns, dict) and ns.get("name") == namespace
            ),
            0,
        )
        if count < 1:
            raise BalancerError(f"no bundles of namespace {namespace!r} in the snapshot", "bundles")
        boundaries = bundle_ops.initial_boundaries(count)
    bundle_ops.validate_boundaries(boundaries)
    bundle = bundle_ops.bundle_for_topic(namespace, boundaries, args.topic)
    load = snapshot.bundles.get(bundle.name)
    return {
        "topic": args.topic,
        "hash": format_hash(topic_hash(args.topic)),
        "bundle": bundle.name,
        "owner": load.owner if load else None,
    }


def _topics(doc: dict[str, Any]) -> list[TopicLoad]:
    return parse_topic_loads(doc.get("topics", []), "topics")


def cmd_split(args: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    """``split --algorithm NAME``: where to cut one bundle (all boundaries, and the children)."""
    _name, algorithm = get_split_algorithm(args.algorithm)
    config = _config(doc)
    spec = obj(doc.get("bundle"), "bundle")
    if "name" in spec:
        bundle = bundle_ops.parse_bundle_name(text(spec, "name", "bundle"))
    else:
        bundle = bundle_ops.Bundle(
            text(spec, "namespace", "bundle", ""),
            bundle_ops.BundleRange(
                parse_hash(spec.get("lower"), "bundle.lower"),
                parse_hash(spec.get("upper"), "bundle.upper"),
            ),
        )
    positions = doc.get("positions")
    if positions is not None:
        positions = [
            parse_hash(p, f"positions[{i}]") for i, p in enumerate(array(positions, "positions"))
        ]
    cuts = algorithm(bundle.range, _topics(doc), positions, config)
    if not cuts:
        return {"boundaries": [], "bundles": [], "reason": "NoSplit"}
    points = [bundle.range.lower, *sorted(set(cuts)), bundle.range.upper]
    for cut in points[1:-1]:
        if not bundle.range.lower < cut < bundle.range.upper:
            raise BalancerError(
                f"boundary {format_hash(cut)} is not strictly inside {bundle.range.label}",
                field="bundle",
            )
    prefix = f"{bundle.namespace}/" if bundle.namespace else ""
    return {
        "boundaries": [format_hash(c) for c in points[1:-1]],
        "bundles": [f"{prefix}{format_hash(a)}_{format_hash(b)}" for a, b in pairwise(points)],
    }


def cmd_split_check(args: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    """``split-check``: which bundles must be split (auto-split thresholds)."""
    candidates = split_check(parse_snapshot(doc), _config(doc))
    return {
        "splits": [
            {"bundle": c.bundle, "reason": c.reason, "value": c.value, "limit": c.limit}
            for c in candidates
        ]
    }


def cmd_shed(args: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    """``shed --strategy NAME``: which bundles to unload this cycle, after Pulsar's
    anti-affinity unload guard."""
    name, _ = get_shedder(args.strategy)
    snapshot = parse_snapshot(doc)
    return shed_guarded(name, snapshot, _config(doc, name), _state(doc)).as_dict()


def cmd_cycle(args: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    """``cycle``: one whole shedding cycle, as the console runs it."""
    snapshot = parse_snapshot(doc)
    config = parse_cycle_config(doc)
    return plan_cycle(snapshot, config, _state(doc)).as_dict()


def cmd_place(args: argparse.Namespace, doc: dict[str, Any]) -> dict[str, Any]:
    """``place --strategy NAME``: which broker gets one unassigned bundle (Danube: topic)."""
    name = get_placement_strategy(args.strategy)
    config = _config(doc, name)
    snapshot = parse_snapshot(doc)
    if name in DANUBE_PLACEMENT:
        unit = text(doc, "topic", "") if "topic" in doc else text(doc, "bundle", "")
        hint = doc.get("hint")
        hint = dict(obj(hint, "hint")) if hint is not None else None
        config = replace(config, assignment_strategy=name)
        return danube_place(snapshot, unit, config, _state(doc), hint).as_dict()
    candidates = doc.get("candidates")
    if candidates is not None:
        candidates = array(candidates, "candidates")
        for i, c in enumerate(candidates):
            if not isinstance(c, str) or not c:
                raise BalancerError("must be a broker name", field=f"candidates[{i}]")
    placement = place(snapshot, text(doc, "bundle", ""), config, _state(doc), candidates, name)
    return placement.as_dict()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = _Parser(prog="python -m balancer", description=__doc__)
    parser.add_argument("--input", help="read the JSON document from FILE instead of stdin")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("hash", help="32-bit hash position of topic names")
    p.add_argument("topics", nargs="+")
    p.set_defaults(handler=cmd_hash, reads_input=False)
    p = sub.add_parser("bundles", help="initial bundle boundaries of a namespace")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--namespace", default="public/default")
    p.set_defaults(handler=cmd_bundles, reads_input=False)
    p = sub.add_parser("lookup", help="bundle and owner of a topic")
    p.add_argument("topic")
    p.set_defaults(handler=cmd_lookup, reads_input=True)
    p = sub.add_parser("split", help="where to cut one bundle")
    p.add_argument("--algorithm", default=SplitAlgorithmName.RANGE_EQUALLY_DIVIDE)
    p.set_defaults(handler=cmd_split, reads_input=True)
    p = sub.add_parser("split-check", help="which bundles must be split")
    p.set_defaults(handler=cmd_split_check, reads_input=True)
    p = sub.add_parser("shed", help="which bundles to unload this cycle")
    p.add_argument("--strategy", default=ShedderName.THRESHOLD)
    p.set_defaults(handler=cmd_shed, reads_input=True)
    p = sub.add_parser("cycle", help="one whole shedding cycle, as the console runs it")
    p.set_defaults(handler=cmd_cycle, reads_input=True)
    p = sub.add_parser("place", help="which broker gets one unassigned bundle")
    p.add_argument("--strategy", default=PlacementName.LEAST_LONG_TERM_MESSAGE_RATE)
    p.set_defaults(handler=cmd_place, reads_input=True)
    for name in ("shed", "place", "split", "split-check", "lookup", "cycle"):
        sub.choices[name].add_argument("--input", dest="sub_input", help=argparse.SUPPRESS)
    return parser


def _read(args: argparse.Namespace, stdin: TextIO) -> dict[str, Any]:
    path = getattr(args, "sub_input", None) or args.input
    try:
        raw = Path(path).read_text(encoding="utf-8") if path else stdin.read()
    except OSError as exc:
        raise BalancerError(f"cannot read input: {exc.strerror}", field="input") from None
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BalancerError(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", "input"
        ) from None
    return dict(obj(doc, "input"))


def main(
    argv: Sequence[str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run one command; returns the exit status (0 ok, 2 bad input)."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        doc = _read(args, stdin) if args.reads_input else {}
        out = args.handler(args, doc)
    except BalancerError as exc:
        json.dump({"error": exc.as_dict()}, stderr)
        stderr.write("\n")
        return 2
    json.dump(out, stdout, indent=2)
    stdout.write("\n")
    return 0
