"""The JSON documents of CLI.md <-> balancer types, with field-precise errors.

One format serves the command line and the console's load-report ingest: an error names the
JSON path of the field at fault (``brokers[2].cpu.limit``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from balancer.config import PulsarConfig
from balancer.cycle import CycleConfig, Strategies
from balancer.danube.config import DanubeConfig
from balancer.errors import BalancerError
from balancer.hashing import format_hash, topic_hash
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage, TopicLoad, TopicStats
from balancer.registry import split_keys
from balancer.safety import SafetyConfig
from balancer.snapshot import ClusterSnapshot, NamespacePolicy

BROKER_STATES = ("active", "draining", "drained")
RESOURCES = {
    "cpu": "cpu",
    "memory": "memory",
    "directMemory": "direct_memory",
    "bandwidthIn": "bandwidth_in",
    "bandwidthOut": "bandwidth_out",
}
RATE_KEYS = {
    "msgRateIn": "msg_rate_in",
    "msgRateOut": "msg_rate_out",
    "msgThroughputIn": "msg_throughput_in",
    "msgThroughputOut": "msg_throughput_out",
}


def at(path: str, key: str) -> str:
    """The JSON path of ``key`` inside ``path`` (``brokers[2]`` + ``cpu`` -> ``brokers[2].cpu``)."""
    return f"{path}.{key}" if path else key


def obj(value: Any, path: str) -> Mapping[str, Any]:
    """``value`` as a JSON object, or BalancerError naming ``path``."""
    if not isinstance(value, Mapping):
        raise BalancerError("must be an object", field=path)
    return value


def array(value: Any, path: str) -> list[Any]:
    """``value`` as a JSON array, or BalancerError naming ``path``."""
    if not isinstance(value, list):
        raise BalancerError("must be an array", field=path)
    return value


def number(doc: Mapping[str, Any], key: str, path: str, default: float | None = 0.0) -> float:
    """A finite, non-negative number at ``doc[key]``; ``default`` when absent (None: required)."""
    where = at(path, key)
    if key not in doc:
        if default is None:
            raise BalancerError("is required", field=where)
        return default
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BalancerError("must be a finite number", field=where)
    if value < 0:
        raise BalancerError("must not be negative", field=where)
    return float(value)


def integer(doc: Mapping[str, Any], key: str, path: str, default: int = 0) -> int:
    """A non-negative integer at ``doc[key]``, ``default`` when absent."""
    where = at(path, key)
    if key not in doc:
        return default
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BalancerError("must be a non-negative integer", field=where)
    return value


def text(doc: Mapping[str, Any], key: str, path: str, default: str | None = None) -> str:
    """A non-empty string at ``doc[key]``; ``default`` when absent (None: required)."""
    where = at(path, key)
    if key not in doc:
        if default is None:
            raise BalancerError("is required", field=where)
        return default
    value = doc[key]
    if not isinstance(value, str) or (default is None and not value):
        raise BalancerError("must be a non-empty string", field=where)
    return value


def parse_hash(value: Any, path: str) -> int:
    """A hash position: an integer, or hex text such as ``0x40000000``.

    Raises:
        BalancerError: anything else (``field`` is ``path``).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value, 16)
        except ValueError:
            pass
    raise BalancerError("must be a hash such as 0x40000000", field=path)


def parse_rates(doc: Mapping[str, Any], path: str) -> MessageRates:
    """msgRateIn/Out (msg/s) and msgThroughputIn/Out (bytes/s); absent means 0."""
    return MessageRates(**{attr: number(doc, key, path) for key, attr in RATE_KEYS.items()})


def parse_resource(doc: Mapping[str, Any], key: str, path: str) -> ResourceUsage:
    """A ``{usage, limit}`` resource; absent is 0 of 0."""
    if key not in doc:
        return ResourceUsage()
    where = at(path, key)
    body = obj(doc[key], where)
    return ResourceUsage(
        usage=number(body, "usage", where, None), limit=number(body, "limit", where, None)
    )


def parse_broker(value: Any, path: str) -> BrokerLoad:
    """One broker of the input document (CLI.md), validated field by field."""
    doc = obj(value, path)
    state = text(doc, "state", path, "active")
    if state not in BROKER_STATES:
        raise BalancerError(f"must be one of {', '.join(BROKER_STATES)}", field=at(path, "state"))
    bundles = array(doc.get("bundles", []), at(path, "bundles"))
    for i, name in enumerate(bundles):
        if not isinstance(name, str) or not name:
            raise BalancerError("must be a bundle name", field=f"{at(path, 'bundles')}[{i}]")
    topics = doc.get("topics", 0)
    stats: tuple[TopicStats, ...] = ()
    if isinstance(topics, list):
        stats = tuple(parse_topic(t, f"{at(path, 'topics')}[{i}]") for i, t in enumerate(topics))
        topic_count = len(stats)
    else:
        topic_count = integer(doc, "topics", path)
    return BrokerLoad(
        name=text(doc, "name", path),
        failure_domain=text(doc, "failureDomain", path, ""),
        state=state,
        **{attr: parse_resource(doc, key, path) for key, attr in RESOURCES.items()},
        rates=parse_rates(doc, path),
        bundles=tuple(bundles),
        topics=topic_count,
        topic_stats=stats,
        top_bundles=_top_bundles(doc, path),
        weighted_max_ema=number(doc, "weightedMaxEMA", path, None)
        if "weightedMaxEMA" in doc
        else None,
        msg_throughput_ema=(
            number(doc, "msgThroughputEMA", path, None) if "msgThroughputEMA" in doc else None
        ),
        updated_at=number(doc, "updatedAt", path, None) if "updatedAt" in doc else None,
        reported_at=number(doc, "reportedAt", path, None) if "reportedAt" in doc else None,
    )


def _top_bundles(doc: Mapping[str, Any], path: str) -> tuple[tuple[str, float, float], ...] | None:
    if "topBundles" not in doc:
        return None
    where = at(path, "topBundles")
    out = []
    for i, item in enumerate(array(doc["topBundles"], where)):
        entry = obj(item, f"{where}[{i}]")
        out.append(
            (
                text(entry, "name", f"{where}[{i}]"),
                number(entry, "msgThroughputIn", f"{where}[{i}]"),
                number(entry, "msgThroughputOut", f"{where}[{i}]"),
            )
        )
    return tuple(out)


def parse_topic(value: Any, path: str) -> TopicStats:
    """A Danube topic load: ``{"name", "messageRate", "byteRate", "producers", "consumers",
    "subscriptions", "backlog"}`` (rates msg/s and bytes/s)."""
    doc = obj(value, path)
    return TopicStats(
        name=text(doc, "name", path),
        message_rate=number(doc, "messageRate", path),
        byte_rate=number(doc, "byteRate", path),
        producers=integer(doc, "producers", path),
        consumers=integer(doc, "consumers", path),
        subscriptions=integer(doc, "subscriptions", path),
        backlog=integer(doc, "backlog", path),
    )


def parse_topic_loads(value: Any, path: str) -> list[TopicLoad]:
    """A bundle's topics for a split: ``[{"topic", "hash" (optional: hashed by name),
    "msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"}]`` (msg/s, bytes/s); a
    topic without any rate has no stats (flow_or_qps_equally_divide ignores it)."""
    out = []
    for i, item in enumerate(array(value, path)):
        where = f"{path}[{i}]"
        body = obj(item, where)
        name = text(body, "topic", where)
        point = parse_hash(body["hash"], f"{where}.hash") if "hash" in body else topic_hash(name)
        has_stats = any(k in body for k in RATE_KEYS)
        rates = parse_rates(body, where)
        out.append(TopicLoad(name, point, rates.msg_rate, rates.throughput, has_stats))
    return out


def topic_loads_document(topics: Sequence[TopicLoad]) -> list[dict[str, Any]]:
    """``topics`` as ``parse_topic_loads`` reads them (rates as "in"; the cut needs their sums)."""
    return [
        {"topic": t.name, "hash": format_hash(t.hash)}
        | ({"msgRateIn": t.msg_rate, "msgThroughputIn": t.throughput} if t.has_stats else {})
        for t in topics
    ]


def parse_bundle(value: Any, path: str) -> BundleLoad:
    """One bundle of the input document: owner, shortTerm/longTerm rates, counts."""
    doc = obj(value, path)
    owner = doc.get("owner")
    if owner is not None and (not isinstance(owner, str) or not owner):
        raise BalancerError("must be a broker name or null", field=at(path, "owner"))
    return BundleLoad(
        name=text(doc, "name", path),
        owner=owner,
        short_term=parse_rates(
            obj(doc.get("shortTerm", {}), at(path, "shortTerm")), at(path, "shortTerm")
        ),
        long_term=parse_rates(
            obj(doc.get("longTerm", {}), at(path, "longTerm")), at(path, "longTerm")
        ),
        topics=integer(doc, "topics", path),
        producers=integer(doc, "producers", path),
        consumers=integer(doc, "consumers", path),
    )


def parse_snapshot(doc: Mapping[str, Any]) -> ClusterSnapshot:
    """The cluster part of an input document -> ClusterSnapshot.

    Raises:
        BalancerError: a malformed field, a duplicate broker or bundle, or ownership that names
            an unknown broker; ``field`` is its JSON path.
    """
    brokers: dict[str, BrokerLoad] = {}
    for i, item in enumerate(array(doc.get("brokers", []), "brokers")):
        broker = parse_broker(item, f"brokers[{i}]")
        if broker.name in brokers:
            raise BalancerError(f"duplicate broker {broker.name!r}", field=f"brokers[{i}].name")
        brokers[broker.name] = broker
    bundles: dict[str, BundleLoad] = {}
    topics: dict[str, tuple[TopicLoad, ...]] = {}
    for i, item in enumerate(array(doc.get("bundles", []), "bundles")):
        bundle = parse_bundle(item, f"bundles[{i}]")
        if bundle.name in bundles:
            raise BalancerError(f"duplicate bundle {bundle.name!r}", field=f"bundles[{i}].name")
        if bundle.owner is not None and bundle.owner not in brokers:
            raise BalancerError(f"unknown broker {bundle.owner!r}", field=f"bundles[{i}].owner")
        bundles[bundle.name] = bundle
        if "topicStats" in item:
            topics[bundle.name] = tuple(
                parse_topic_loads(item["topicStats"], f"bundles[{i}].topicStats")
            )
    namespaces: dict[str, NamespacePolicy] = {}
    for i, item in enumerate(array(doc.get("namespaces", []), "namespaces")):
        ns = obj(item, f"namespaces[{i}]")
        group = ns.get("antiAffinityGroup")
        if group is not None and not isinstance(group, str):
            raise BalancerError("must be a string", field=f"namespaces[{i}].antiAffinityGroup")
        name = text(ns, "name", f"namespaces[{i}]")
        namespaces[name] = NamespacePolicy(name, group)
    recent = obj(doc.get("recentlyUnloadedBundles", {}), "recentlyUnloadedBundles")
    recently_unloaded = {
        name: number(recent, name, "recentlyUnloadedBundles", None) for name in recent
    }
    moves: tuple[float, ...] | None = None
    if "recentMoves" in doc:
        times = array(doc["recentMoves"], "recentMoves")
        for i, t in enumerate(times):
            if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t < math.inf:
                raise BalancerError(
                    "must be a time in seconds since the epoch", field=f"recentMoves[{i}]"
                )
        moves = tuple(float(t) for t in times)
    return ClusterSnapshot(
        now=number(doc, "now", "", 0.0),
        brokers=brokers,
        bundles=bundles,
        namespaces=namespaces,
        recently_unloaded=recently_unloaded,
        recent_moves=moves,
        bundle_topics=topics,
    )


SAFETY_KEYS: Final = (
    "coolDownSeconds",
    "maxMovesPerHour",
    "blacklist",
    "brokerTimeoutSeconds",
    "autoSplit",
)
STRATEGY_KEYS: Final = {
    "shedder": "shedder",
    "placement": "placement",
    "splitAlgorithm": "split_algorithm",
}


def parse_safety(value: Any, path: str = "safety") -> SafetyConfig:
    """The ``safety`` object of ``cycle`` (CLI.md): coolDownSeconds, maxMovesPerHour,
    blacklist (shell patterns), brokerTimeoutSeconds, autoSplit. Missing keys take
    SafetyConfig's defaults; unknown keys are an error naming them."""
    doc = obj(value, path)
    changes: dict[str, Any] = {}
    for key in doc:
        if key not in SAFETY_KEYS:
            raise BalancerError(
                f"unknown safety key {key!r}; valid keys: {', '.join(SAFETY_KEYS)}",
                field=at(path, key),
            )
    if "coolDownSeconds" in doc:
        changes["bundle_cool_down_s"] = number(doc, "coolDownSeconds", path)
    if "brokerTimeoutSeconds" in doc:
        changes["broker_timeout_s"] = number(doc, "brokerTimeoutSeconds", path)
    if "maxMovesPerHour" in doc:
        changes["max_moves_per_hour"] = integer(doc, "maxMovesPerHour", path)
    if "blacklist" in doc:
        patterns = array(doc["blacklist"], at(path, "blacklist"))
        for i, pattern in enumerate(patterns):
            if not isinstance(pattern, str) or not pattern:
                raise BalancerError("must be a shell pattern", field=f"{path}.blacklist[{i}]")
        changes["blacklist"] = tuple(patterns)
    if "autoSplit" in doc:
        if not isinstance(doc["autoSplit"], bool):
            raise BalancerError("must be true or false", field=at(path, "autoSplit"))
        changes["is_auto_split_enabled"] = doc["autoSplit"]
    return replace(SafetyConfig(), **changes)


def parse_cycle_config(doc: Mapping[str, Any]) -> CycleConfig:
    """The configuration of ``cycle``: ``strategies``, ``config`` (Pulsar keys, and Danube keys for
    Danube's strategies) and ``safety``.

    Raises:
        BalancerError: an unknown key or strategy, a value of the wrong type (``field`` names it).
    """
    strategies = obj(doc.get("strategies", {}), "strategies")
    names: dict[str, str] = {}
    for key in strategies:
        if key not in STRATEGY_KEYS:
            raise BalancerError(
                f"unknown strategies key {key!r}; valid keys: {', '.join(STRATEGY_KEYS)}",
                field=at("strategies", key),
            )
        names[STRATEGY_KEYS[key]] = text(strategies, key, "strategies")
    pulsar, danube = split_keys(obj(doc.get("config", {}), "config"))
    return CycleConfig(
        strategies=Strategies(**names),
        pulsar=PulsarConfig.from_keys(pulsar),
        safety=parse_safety(doc.get("safety", {})),
        danube=DanubeConfig.from_keys(danube),
    )


def snapshot_document(snapshot: ClusterSnapshot, *, topics: bool = True) -> dict[str, Any]:
    """The input document of CLI.md for ``snapshot`` (the inverse of ``parse_snapshot``): what
    an operator or a test feeds to ``python -m balancer cycle`` to replay a console decision;
    without the bundles' ``topicStats`` when ``topics`` is False."""

    def rates(r: MessageRates) -> dict[str, float]:
        return {key: getattr(r, attr) for key, attr in RATE_KEYS.items()}

    brokers = []
    for broker in snapshot.brokers.values():
        doc: dict[str, Any] = {
            "name": broker.name,
            "failureDomain": broker.failure_domain,
            "state": broker.state,
            **{
                key: {"usage": getattr(broker, attr).usage, "limit": getattr(broker, attr).limit}
                for key, attr in RESOURCES.items()
            },
            **rates(broker.rates),
            "bundles": list(broker.bundles),
            "topics": broker.topics,
        }
        for key, value in (
            ("weightedMaxEMA", broker.weighted_max_ema),
            ("msgThroughputEMA", broker.msg_throughput_ema),
            ("updatedAt", broker.updated_at),
            ("reportedAt", broker.reported_at),
        ):
            if value is not None:
                doc[key] = value
        brokers.append(doc)
    return {
        "now": snapshot.now,
        "brokers": brokers,
        "bundles": [
            {
                "name": b.name,
                "owner": b.owner,
                "shortTerm": rates(b.short_term),
                "longTerm": rates(b.long_term),
                "topics": b.topics,
                "producers": b.producers,
                "consumers": b.consumers,
            }
            | (
                {"topicStats": topic_loads_document(snapshot.bundle_topics[b.name])}
                if topics and b.name in snapshot.bundle_topics
                else {}
            )
            for b in snapshot.bundles.values()
        ],
        "namespaces": [
            {"name": ns.name, "antiAffinityGroup": ns.anti_affinity_group}
            for ns in snapshot.namespaces.values()
        ],
        "recentlyUnloadedBundles": dict(snapshot.recently_unloaded),
        **(
            {"recentMoves": list(snapshot.recent_moves)}
            if snapshot.recent_moves is not None
            else {}
        ),
    }


def safety_document(safety: SafetyConfig) -> dict[str, Any]:
    """The ``safety`` object of ``cycle`` for ``safety`` (the inverse of ``parse_safety``)."""
    return {
        "coolDownSeconds": safety.bundle_cool_down_s,
        "maxMovesPerHour": safety.max_moves_per_hour,
        "blacklist": list(safety.blacklist),
        "brokerTimeoutSeconds": safety.broker_timeout_s,
        "autoSplit": safety.is_auto_split_enabled,
    }
