"""Bundles and namespaces as the pages show them: the bundle map a page of whole namespaces at a
time, the namespaces list, bundles with their live load.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.db.models import Count, QuerySet

from balancer.bundles import parse_bundle_name
from balancer.errors import BalancerError
from console import loadstore
from console.errors import ConsoleError
from console.models import (
    Broker,
    Bundle,
    BundleLive,
    Namespace,
    PulsarMove,
)
from console.selectors.config import balancer_config_get, cycle_config_get
from console.selectors.dashboard import cool_down_s


def namespace_rows(contains: str = "") -> QuerySet[Namespace]:
    """Namespaces by name with their tenant and ``bundle_count`` (one query a page, at any
    size); ``contains``: part of the name, any case."""
    rows = Namespace.objects.select_related("tenant").annotate(bundle_count=Count("bundles"))
    if contains:
        rows = rows.filter(name__icontains=contains)
    return rows.order_by("name")


def bundles_with_loads(bundles: Sequence[Bundle]) -> Sequence[Bundle]:
    """Attach the live load store's figures (``Bundle.live``) to ``bundles``, each read from
    its owner's entry; unowned or unreported bundles keep zeros. Returns ``bundles``."""
    owners = sorted({b.owner.name for b in bundles if b.owner_id is not None and b.owner})
    entries = loadstore.entries_get(owners)
    found: dict[tuple[int, int, int, str], tuple[Any, ...]] = {}
    for owner, entry in entries.items():
        for record in entry.bundles:
            key = (int(record["namespace"]), int(record["lower"]), int(record["upper"]), owner)
            found[key] = (record["short"], record["long"], record["counts"])
    for bundle in bundles:
        if bundle.owner is None:
            continue
        hit = found.get((bundle.namespace_id, bundle.lower, bundle.upper, bundle.owner.name))
        if hit is not None:
            short, long, counts = hit
            bundle.live = BundleLive(
                tuple(short.tolist()), tuple(long.tolist()), tuple(counts.tolist())
            )
    return bundles


# The bundle map's page: whole namespaces, in name order, up to this many bundles (at least one
# namespace); a cluster of at most this many is one page. 50,000 bundles in one page were 6 MB
# of JSON every 5 s to each open map (issue 26).
BUNDLE_MAP_PAGE_BUNDLES = 2000


def page_params(params: Mapping[str, str], text: str) -> tuple[int, str]:
    """A paged list's ``page`` (1-based; default 1) and its filter, the query parameter named
    ``text`` (part of a name, any case), from query ``params``: the bundle map's and the
    namespaces list's.

    Raises:
        ConsoleError: 400 naming ``page`` (not a whole number from 1) or ``text`` (over 300
            characters, or a NUL).
    """
    raw = str(params.get("page") or "1").strip()
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1 or len(raw) > 9:
        raise ConsoleError("page is a whole number from 1", field="page")
    contains = str(params.get(text) or "").strip()
    if len(contains) > 300 or "\x00" in contains:
        raise ConsoleError(f"{text} is at most 300 characters, without NUL", field=text)
    return int(raw), contains


def bundle_map(*, now: datetime | None = None, page: int = 1, contains: str = "") -> dict[str, Any]:
    """Every namespace's hash space as its bundles, for the bundle map: ``{"at" (ISO, UTC),
    "brokers": [{"name", "domain", "state"}] by name (a broker's colour is its position),
    "namespaces": [{"name", "antiAffinityGroup", "bundles": [[lower, upper, owner or None,
    throughput (bytes/s, short-term), msg rate (msg/s), topics, last move (ISO or None),
    eligible at, figures]]}]}``. ``eligible at`` (ISO, UTC): when a bundle moved within the
    cool-down (``cool_down_s``) may move again; None when it may now. Until then the balancer
    will not move it (an operator may, with an override). ``figures``: "reported" (its
    owner's last report), "estimated" (not reported since a split: its share of the hash range
    of the bundle it was cut from, as last reported) or "none". ``moving``: bundle name ->
    {"state" (queued, sending, verifying), "source", "destination" (None: Pulsar chooses)} for
    the unloads queued or in flight on an attached Pulsar cluster.

    Paged by whole namespaces (``BUNDLE_MAP_PAGE_BUNDLES``): ``page`` asks for one (past the
    last: the last), ``contains`` keeps the namespaces whose name holds it; ``"page": {"number",
    "pages", "namespaces" and "bundles" (all that match), "first", "last" (the page's
    namespaces), "contains"}``."""
    now = now or datetime.now(UTC)
    listed = Namespace.objects.order_by("name")
    if contains:
        listed = listed.filter(name__icontains=contains)
    pages: list[list[tuple[int, str]]] = [[]]
    size = total = 0
    for pk, name, count in listed.annotate(n=Count("bundles")).values_list("pk", "name", "n"):
        if pages[-1] and size + count > BUNDLE_MAP_PAGE_BUNDLES:
            pages.append([])
            size = 0
        pages[-1].append((pk, name))
        size += count
        total += count
    number = min(max(1, page), len(pages))
    shown = pages[number - 1]
    shown_ids = {pk for pk, _ in shown}
    config = balancer_config_get()
    cycle = cycle_config_get(config)
    quiet_s = cool_down_s(config, cycle)
    brokers = list(Broker.objects.select_related("failure_domain").order_by("name"))
    # Every reported record: (namespace id, lower, upper) -> (reporter, throughput (bytes/s),
    # msg rate (msg/s), topics); by namespace too, where a split's children find their parent.
    reported: dict[tuple[int, int, int], tuple[str, float, float, int]] = {}
    by_namespace: dict[int, list[tuple[int, int, float, float, int]]] = {}
    for name, live in loadstore.entries_get([b.name for b in brokers]).items():
        records = live.bundles
        records = records[np.isin(records["namespace"], list(shown_ids))]
        short = records["short"]
        throughput = (short[:, 2] + short[:, 3]).tolist()
        msg_rate = (short[:, 0] + short[:, 1]).tolist()
        topics = records["counts"][:, 0].tolist()
        keys = zip(
            records["namespace"].tolist(),
            records["lower"].tolist(),
            records["upper"].tolist(),
            strict=True,
        )
        for key, t, m, n in zip(keys, throughput, msg_rate, topics, strict=True):
            reported[key] = (name, t, m, n)
            by_namespace.setdefault(key[0], []).append((key[1], key[2], t, m, n))
    policies = dict(
        Namespace.objects.filter(pk__in=shown_ids).values_list("pk", "anti_affinity_group")
    )
    namespaces: dict[int, dict[str, Any]] = {}
    rows = (
        Bundle.objects.filter(namespace_id__in=shown_ids)
        .order_by("namespace__name", "lower")
        .values_list(
            "namespace_id", "namespace__name", "lower", "upper", "owner__name", "last_unloaded_at"
        )
    )
    for namespace_id, namespace, lower, upper, owner, moved in rows:
        entry = namespaces.get(namespace_id)
        if entry is None:
            entry = namespaces[namespace_id] = {
                "name": namespace,
                "antiAffinityGroup": policies.get(namespace_id) or None,
                "bundles": [],
            }
        hit = reported.get((namespace_id, lower, upper))
        if hit is not None and owner is not None and hit[0] == owner:
            _, throughput, msg_rate, topics = hit
            figures = "reported"
        else:
            throughput, msg_rate, topics, figures = 0.0, 0.0, 0, "none"
            parent = next(
                (
                    r
                    for r in by_namespace.get(namespace_id, ())
                    if r[0] <= lower and upper <= r[1] and r[1] - r[0] > upper - lower
                ),
                None,
            )
            if parent is not None:
                share = (upper - lower) / (parent[1] - parent[0])
                throughput, msg_rate = parent[2] * share, parent[3] * share
                topics, figures = round(parent[4] * share), "estimated"
        entry["bundles"].append(
            [
                lower,
                upper,
                owner,
                throughput,
                msg_rate,
                topics,
                moved.astimezone(UTC).isoformat() if moved else None,
                (moved + timedelta(seconds=quiet_s)).astimezone(UTC).isoformat()
                if moved and (now - moved).total_seconds() < quiet_s
                else None,
                figures,
            ]
        )
    return {
        "at": now.astimezone(UTC).isoformat(),
        "brokers": [
            {
                "name": b.name,
                "domain": b.failure_domain.name if b.failure_domain else "",
                "state": b.state,
            }
            for b in brokers
        ],
        "namespaces": list(namespaces.values()),
        "page": {
            "number": number,
            "pages": len(pages),
            "namespaces": sum(len(p) for p in pages),
            "bundles": total,
            "first": shown[0][1] if shown else None,
            "last": shown[-1][1] if shown else None,
            "contains": contains,
        },
        # The bundles on their way on Pulsar: still on their owner until Pulsar is seen moving
        # them (a drained broker's, say), shown as what they are.
        "moving": {
            m.bundle: {"state": m.state, "destination": m.destination or None, "source": m.source}
            for m in PulsarMove.objects.filter(
                state__in=PulsarMove.IN_FLIGHT, kind=PulsarMove.Kind.UNLOAD
            ).only("bundle", "state", "destination", "source")
        },
    }


def bundle_rows(names: Iterable[str], *, skip_invalid: bool = False) -> dict[str, Bundle]:
    """The bundle rows of ``names`` (unknown names are absent), by name, in one query.

    Raises:
        ConsoleError: 400 (field ``bundle``) for a name that is no bundle name, unless
            ``skip_invalid`` (then it is absent, as an unknown one).
    """
    keys: dict[tuple[str, int, int], str] = {}
    for name in names:
        try:
            parsed = parse_bundle_name(name)
        except BalancerError as exc:
            if skip_invalid:
                continue
            raise ConsoleError(exc.message, field="bundle") from None
        keys[(parsed.namespace, parsed.range.lower, parsed.range.upper)] = name
    if not keys:
        return {}
    rows = Bundle.objects.select_related("namespace", "owner").filter(
        namespace__name__in={k[0] for k in keys}, lower__in={k[1] for k in keys}
    )
    out = {}
    for row in rows:
        found = keys.get((row.namespace.name, row.lower, row.upper))
        if found is not None:
            out[found] = row
    return out
