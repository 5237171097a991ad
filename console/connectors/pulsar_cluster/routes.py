"""The admin REST API the simulated Pulsar cluster's brokers answer (PULSAR_ADMIN.md E1–E19,
A1–A3): paths, shapes, status codes and 307 hops. No Django."""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import math
import re
import time
from collections.abc import Mapping
from urllib.parse import parse_qs, unquote, urlencode

from balancer.bundles import BundleRange, bundle_index_for, split_boundaries
from balancer.config import PulsarConfig
from balancer.errors import BalancerError
from balancer.hashing import format_hash, topic_hash
from balancer.load import TopicLoad
from balancer.names import SplitAlgorithmName
from balancer.registry import get_split_algorithm
from console.connectors.pulsar_cluster.common import (
    _RANGE,
    CONFIG,
    LISTED_DYNAMIC,
    NO_CONTENT,
    SERVICE_PORT,
    RequestRecord,
    Response,
    _core_keys,
    _json,
    _reason,
    _Request,
    _string,
    _text,
    _unexpected,
)
from console.connectors.pulsar_cluster.state import ClusterState

log = logging.getLogger("fulcrum.pulsar_cluster")


class PulsarCluster(ClusterState):
    """The simulated cluster answering Pulsar's admin REST API (``handle``), one broker at a
    time; its state and steps are ``ClusterState``'s."""

    def handle(
        self,
        broker_id: str,
        method: str,
        path: str,
        query: str = "",
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        is_secure: bool = False,
    ) -> Response:
        """Answer one request sent to broker ``broker_id`` (over https when ``is_secure``):
        ``path`` still percent-encoded, ``query`` without ``?``. Returns (status, headers,
        body); every request is recorded in ``requests``. Errors are Pulsar's: ``{"reason"}``
        JSON, or 500 ``text/plain`` for an unmapped exception (Pulsar RestException,
        PulsarWebResource)."""
        with self.lock:
            self._unloaded = False
            response = self._route(
                broker_id, method.upper(), path, query, headers or {}, body, is_secure
            )
            delay = self.unload_delay_s if self._unloaded else 0.0
            self.requests.append(
                RequestRecord(broker_id, method.upper(), path, query, response[0], is_secure)
            )
        if delay > 0:
            time.sleep(delay)  # the lock is free: other requests go on meanwhile
        return response

    def _route(
        self,
        me: str,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: bytes,
        is_secure: bool = False,
    ) -> Response:
        if me not in self.port_of:
            return _reason(404, f"broker {me} is not part of this cluster")
        if self.token is not None:
            auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
            if not auth.startswith("Bearer "):
                return _reason(401, "Authentication required")
            if auth[len("Bearer ") :] != self.token:
                return _reason(401, "Failed to authenticate: invalid token")
        segs = [unquote(s) for s in path.split("/")[1:]]
        while segs and not segs[-1]:
            segs.pop()
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        request = _Request(me, method, path, query, params, body, is_secure)
        if segs == ["metrics"] and method == "GET":
            return self._metrics(me)
        if segs[:3] == ["lookup", "v2", "topic"] and method == "GET":
            return self._lookup(segs[3:])
        if segs[:2] != ["admin", "v2"] or len(segs) < 3:
            return _reason(404, "Not Found")
        head, rest = segs[2], segs[3:]
        if head == "clusters" and method == "GET":
            return self._clusters(request, rest)
        if head == "brokers":
            return self._brokers(request, rest)
        if head == "broker-stats" and method == "GET":
            return self._broker_stats(me, rest)
        if head == "tenants" and not rest and method == "GET":
            return _json(200, [*self.layout.tenants, "pulsar"])
        if head == "namespaces":
            return self._namespaces(request, rest)
        return _reason(404, "Not Found")

    def _remote(self, r: _Request) -> Response:
        """A call about another cluster of the configuration store: 307 to its service URL
        (``PulsarWebResource.validateClusterOwnership``), path and query kept."""
        location = self.remote_url + r.path + (f"?{r.query}" if r.query else "")
        return 307, {"Location": location, "Content-Type": "application/json"}, b""

    # E1, E5
    def _clusters(self, r: _Request, rest: list[str]) -> Response:
        if not rest:
            # ClustersBase.getClusters: every cluster of the configuration store, a Set
            # ("global" filtered): listed here with the remote ones first.
            return _json(200, [*self.remote_clusters, self.cluster])
        if rest[0] in self.remote_clusters:
            return self._remote(r)
        if rest[0] != self.cluster:
            return _reason(404, f"Cluster {rest[0]} does not exist")
        domains: dict[str, list[str]] = {}
        for broker in self.broker_ids:
            domains.setdefault(self.spec_of[broker].failure_domain, []).append(broker)
        if rest[1:] == ["failureDomains"]:
            return _json(200, {d: {"brokers": b} for d, b in domains.items()})
        if len(rest) == 3 and rest[1] == "failureDomains":
            if rest[2] not in domains:
                return _reason(404, f"Domain {rest[2]} for cluster {self.cluster} does not exist")
            return _json(200, {"brokers": domains[rest[2]]})
        return _reason(404, "Not Found")

    # E2, E3, E4, E15–E19, X1
    def _brokers(self, r: _Request, rest: list[str]) -> Response:
        if rest and rest[0] == "configuration":
            return self._configuration(r, rest[1:])
        if r.method != "GET":
            return _reason(404, "Not Found")
        active = sorted(self.active, key=lambda b: self.port_of[b])
        if not rest:
            return _json(200, active)
        if rest == ["leaderBroker"]:
            leader = self.leader
            info = {"serviceUrl": f"http://{leader}"}
            if self.version >= (3,):
                info["brokerId"] = leader
            return _json(200, info)
        if rest in (["health"], ["ready"]):
            return _text(200, "ok")
        if rest[0] in self.remote_clusters:
            return self._remote(r)
        if rest[0] != self.cluster:
            return _reason(404, f"Cluster {rest[0]} does not exist")
        if len(rest) == 1:
            return _json(200, active)
        if len(rest) == 3 and rest[2] == "ownedNamespaces":
            # PulsarWebResource.maybeRedirectToBroker: a http(s):// prefix is dropped; an
            # unknown id is a 404; another broker's a 307 to its webServiceUrlTls when the
            # request came over https, else its webServiceUrl.
            named = re.sub(r"^https?://", "", rest[1])
            if self.version < (3,) and named != r.me:
                # 2.10's validateBrokerName: a redirect to the host named, known or not, on the
                # id's (http) port whatever the request's scheme.
                scheme = "https" if r.is_secure else "http"
                location = f"{scheme}://{named}{r.path}" + (f"?{r.query}" if r.query else "")
                return 307, {"Location": location, "Content-Type": "application/json"}, b""
            if named not in self.active:
                return _reason(404, f"Broker id '{rest[1]}' not found in available brokers.")
            if named != r.me:
                return self._redirect(named, r)
            status = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
            return _json(200, {b: dict(status) for b in self._owned(r.me, system=True)})
        return _reason(404, "Not Found")

    def _config_written(self, *, delete: bool = False) -> Response:
        """E18/E19's success (``BrokersBase``): 200 (``Response.ok()``), but 204 for a delete
        before 3.0."""
        if delete and self.version < (3,):
            return NO_CONTENT
        return 200, {}, b""

    def _not_dynamic(self) -> Response:
        """BrokersBase's refusal of a key that is not dynamic ("Can't" from 3.x)."""
        word = "Can't" if self.version >= (3,) else "Cannot"
        return _reason(412, f"{word} update non-dynamic configuration")

    def _configuration(self, r: _Request, rest: list[str]) -> Response:
        dynamic = sorted(
            {k for k, (_, is_dynamic) in CONFIG.items() if is_dynamic} | set(LISTED_DYNAMIC)
        )
        if r.method == "GET" and not rest:
            return _json(200, dynamic)
        if r.method == "GET" and rest == ["values"]:
            return _json(200, dict(sorted(self.overrides.items())))
        if r.method == "GET" and rest == ["runtime"]:
            runtime = {k: _string(v) for k, v in sorted(self.effective.items())}
            index = self.broker_ids.index(r.me)
            tls = self.tls_port_of.get(r.me)
            # ServiceConfiguration's Optional<Integer> ports print as Java's Optional does.
            runtime |= {
                "clusterName": self.cluster,
                "advertisedAddress": self.host,
                "webServicePort": f"Optional[{self.port_of[r.me]}]",
                "webServicePortTls": f"Optional[{tls}]" if tls else "Optional.empty",
                "brokerServicePort": f"Optional[{SERVICE_PORT + index}]",
            }
            if self.version < (3,):
                # 2.10 spells the key exposeBunlesMetricsInPrometheus (fixed later).
                value = runtime.pop("exposeBundlesMetricsInPrometheus")
                runtime["exposeBunlesMetricsInPrometheus"] = value
            return _json(200, runtime)
        if r.method == "POST" and len(rest) == 2:
            return self._set_config(rest[0], rest[1])
        if r.method == "DELETE" and len(rest) == 1:
            if rest[0] not in dynamic:
                return self._not_dynamic()
            # The override goes; the value stays effective until the broker restarts.
            self.overrides.pop(rest[0], None)
            return self._config_written(delete=True)
        return _reason(404, "Not Found")

    def _set_config(self, name: str, text: str) -> Response:
        """E18: parse ``text`` as the key's type (booleans true/false, numbers) and apply it at
        once, cluster-wide (Pulsar BrokersBase.updateDynamicConfiguration)."""
        entry = CONFIG.get(name)
        if name in LISTED_DYNAMIC and entry is not None and text == _string(entry[0]):
            self.overrides[name] = text
            return self._config_written()
        if name in LISTED_DYNAMIC:
            # Dynamic in Pulsar, but a switch of load manager at runtime is not simulated.
            return _reason(412, "Invalid dynamic-config value")
        if entry is None or not entry[1]:
            return self._not_dynamic()
        default = entry[0]
        value: bool | int | float | str
        try:
            if isinstance(default, bool):
                if text.lower() not in ("true", "false"):
                    raise ValueError(text)
                value = text.lower() == "true"
            elif isinstance(default, int):
                value = int(text)
            elif isinstance(default, float):
                value = float(text)
                if not math.isfinite(value):
                    raise ValueError(text)
            else:
                if not text.strip():
                    raise ValueError(text)
                value = text.strip()
            PulsarConfig.from_keys(_core_keys({name: value}))
        except (ValueError, BalancerError):
            return _reason(412, "Invalid dynamic-config value")
        self.effective[name] = value
        self.overrides[name] = _string(value)
        log.info("dynamic configuration %s = %s", name, _string(value))
        return self._config_written()

    # E11, E12
    def _broker_stats(self, me: str, rest: list[str]) -> Response:
        if rest == ["load-report"]:
            if self.extensible:
                # ExtensibleLoadManagerWrapper.generateLoadReport() throws: unmapped -> 500.
                return _unexpected("java.lang.UnsupportedOperationException", "null")
            return _json(200, self.load_report(me))
        if rest == ["topics"]:
            return _json(200, self._topic_stats(me))
        return _reason(404, "Not Found")

    def _lookup(self, rest: list[str]) -> Response:
        if len(rest) not in (4, 5) or rest[0] not in ("persistent", "non-persistent"):
            return _reason(404, "Not Found")
        if len(rest) == 5 and rest[4] != "bundle":
            return _reason(404, "Not Found")
        namespace = f"{rest[1]}/{rest[2]}"
        bounds = self.boundaries.get(namespace)
        if bounds is None:
            return _reason(404, f"Namespace {namespace} does not exist")
        topic = f"{rest[0]}://{namespace}/{rest[3]}"
        index = bundle_index_for(bounds, topic_hash(topic))
        label = f"{format_hash(bounds[index])}_{format_hash(bounds[index + 1])}"
        if len(rest) == 5:
            return _text(200, label)
        bundle = f"{namespace}/{label}"
        owner = self.owners.get(bundle) or self._assign([bundle], "lookup").get(bundle)
        if owner is None:
            return _reason(503, f"No broker available to own {bundle}")
        port = SERVICE_PORT + self.broker_ids.index(owner)
        return _json(
            200,
            {
                "brokerUrl": f"pulsar://{self.host}:{port}",
                "httpUrl": f"http://{owner}",
                "nativeUrl": f"pulsar://{self.host}:{port}",
            },
        )

    # E7, E8, E9, E9b, A1, A2, A3
    def _namespaces(self, r: _Request, rest: list[str]) -> Response:
        tenants = [*self.layout.tenants, "pulsar"]
        is_group_query = len(rest) == 3 and rest[1] == "antiAffinity"
        if not rest or (rest[0] not in tenants and not is_group_query):
            return _reason(404, f"Tenant {rest[0] if rest else ''} does not exist")
        if len(rest) == 1 and r.method == "GET":
            # The heartbeat namespaces have no policies: Namespaces.getTenantNamespaces does
            # not list them (pulsar/system it does).
            prefix = rest[0] + "/"
            return _json(
                200,
                [
                    ns
                    for ns in self.boundaries
                    if ns.startswith(prefix) and ns not in self.heartbeats
                ],
            )
        if len(rest) == 3 and rest[1] == "antiAffinity" and r.method == "GET":
            if rest[0] != self.cluster:
                return _reason(412, f"Cluster {rest[0]} does not exist")
            tenant = r.params.get("tenant") or r.params.get("property")
            return _json(
                200,
                [
                    ns
                    for ns, group in self.groups.items()
                    if group == rest[2] and (not tenant or ns.startswith(tenant + "/"))
                ],
            )
        if len(rest) < 3:
            return _reason(404, "Not Found")
        namespace = f"{rest[0]}/{rest[1]}"
        bounds = self.boundaries.get(namespace)
        if bounds is None:
            return _reason(404, f"Namespace {namespace} does not exist")
        tail = rest[2:]
        if tail == ["bundles"] and r.method == "GET":
            return _json(
                200, {"boundaries": [format_hash(b) for b in bounds], "numBundles": len(bounds) - 1}
            )
        if tail == ["antiAffinity"] and r.method == "GET":
            # Namespaces.getNamespaceAntiAffinityGroup returns a String: raw text under the
            # resource's JSON media type; none: 204.
            group = self.groups.get(namespace)
            return _text(200, group, "application/json") if group else NO_CONTENT
        if tail == ["unload"] and r.method == "PUT":
            return self._unload_namespace(namespace)
        if len(tail) == 2 and tail[1] == "unload" and r.method == "PUT":
            return self._unload(r, namespace, tail[0])
        if len(tail) == 2 and tail[1] == "split" and r.method == "PUT":
            return self._split(r, namespace, tail[0])
        return _reason(404, "Not Found")

    def _bundle(self, namespace: str, label: str) -> str | Response:
        """``tenant/ns/0x…_0x…`` when ``label`` is one of the namespace's bundles now, else 412
        (Pulsar PulsarWebResource.validateNamespaceBundleRange)."""
        match = _RANGE.match(label)
        if match is None:
            return _reason(412, f"Invalid bundle range {label}")
        lower, upper = int(match[1], 16), int(match[2], 16)
        bounds = self.boundaries[namespace]
        i = bisect.bisect_left(bounds, lower)
        if i + 1 >= len(bounds) or bounds[i] != lower or bounds[i + 1] != upper:
            return _reason(412, f"Invalid bundle range {namespace}/{label}")
        return f"{namespace}/{format_hash(lower)}_{format_hash(upper)}"

    def web_url(self, broker: str, *, is_secure: bool) -> str:
        """``broker``'s web URL for a request that came over https (``is_secure``: its
        ``webServiceUrlTls`` when it has one) or http."""
        tls = self.tls_port_of.get(broker)
        return f"https://{self.host}:{tls}" if is_secure and tls else f"http://{broker}"

    def _redirect(self, broker: str, r: _Request, **changes: str | None) -> Response:
        """307 to ``broker`` with the same path and the query changed by ``changes`` (None
        removes a parameter): Pulsar's redirect to the owner, the leader or the named broker,
        over https to its TLS port when the request came over https
        (``PulsarWebResource.maybeRedirectToBroker``, ``validateBundleOwnershipAsync``)."""
        params = parse_qs(r.query, keep_blank_values=True)
        for key, value in changes.items():
            params.pop(key, None)
            if value is not None:
                params[key] = [value]
        rest = urlencode(params, doseq=True)
        base = self.web_url(broker, is_secure=r.is_secure)
        location = base + r.path + (f"?{rest}" if rest else "")
        return 307, {"Location": location, "Content-Type": "application/json"}, b""

    def _unload(self, r: _Request, namespace: str, label: str) -> Response:
        """A1 in the order of ``NamespacesBase.internalUnloadNamespaceBundleAsync``: 412 not a
        bundle; the destination first (a ``http(s)://`` prefix dropped; not active: 409), and
        under the modular load manager a 307 to the leader, which keeps the one-shot hint
        (``setNamespaceBundleAffinity``, keyed as ``affinity_key``) — before the ownership
        check, so an unowned bundle's hint stays until its next lookup; then 204 and nothing
        done when nobody owns it; else 307 to the owner (without ``destinationBroker`` under the
        modular manager) and the unload. Extensible: a transfer (500 to the same broker).
        Heartbeat bundles are skipped (204)."""
        bundle = self._bundle(namespace, label)
        if not isinstance(bundle, str):
            return bundle
        if namespace in self.system:
            log.info("skip unloading heartbeat bundle %s", bundle)
            return NO_CONTENT
        destination = r.params.get("destinationBroker") if self.version >= (3,) else None
        if destination:
            destination = re.sub(r"^https?://", "", destination).rstrip("/")
            if destination not in self.active:
                return _reason(
                    409, "Not allowed unload namespace bundle to inactive destination broker"
                )
            if not self.extensible:
                if r.me != self.leader:
                    return self._redirect(self.leader, r, authoritative="false")
                self.affinity[self.affinity_key(bundle)] = destination
        owner = self.owners.get(bundle)
        if owner is None:
            log.info("namespace bundle %s is not owned by any broker: nothing to unload", bundle)
            return NO_CONTENT
        if self.extensible:
            if r.me != owner:
                hop = "true" if destination else "false"
                return self._redirect(owner, r, authoritative=hop)
            if destination == owner:
                return _unexpected(
                    "java.lang.IllegalArgumentException",
                    f"The bundle {bundle} cannot be transfer to same broker",
                )
            self.owners[bundle] = None
            self._unloaded = True
            if destination:
                self._own(bundle, destination, "transfer")
            log.info(
                "%s %s from %s to %s",
                "transfer" if destination else "unload",
                bundle,
                owner,
                destination,
            )
            return NO_CONTENT
        if r.me != owner:
            # From the leader (a destination was given) the owner hop is authoritative.
            hop = "true" if destination else "false"
            return self._redirect(owner, r, destinationBroker=None, authoritative=hop)
        self.owners[bundle] = None
        self._unloaded = True
        log.info("unloaded %s from %s (next owner on lookup: %s)", bundle, owner, destination)
        return NO_CONTENT

    def _unload_namespace(self, namespace: str) -> Response:
        """A3: every owned bundle of the namespace unloaded; 412 when none is owned."""
        if namespace in self.system:
            return NO_CONTENT
        owned = [
            b for b, o in self.owners.items() if o is not None and b.rsplit("/", 1)[0] == namespace
        ]
        if not owned:
            return _reason(412, "Namespace is already unloaded or Namespace has bundles activated")
        for bundle in owned:
            self.owners[bundle] = None
            self._unloaded = True
        return NO_CONTENT

    def _split(self, r: _Request, namespace: str, label: str) -> Response:
        """A2 (§4.3): 412 an unsupported algorithm, specified_positions_divide without
        positions, not a bundle, a split that cannot be made; an unowned bundle is assigned
        first (Pulsar's quirk), a non-owner answers 307. Modular: both children stay with the
        owner, and with ``unload=true`` are unloaded; extensible: ``unload`` is ignored.
        ``SpecifiedPositionsBundleSplitAlgorithm.getSplitBoundary``: positions outside the
        bundle are dropped silently, and a bundle with at most one topic gives no boundary. An
        algorithm that finds none splits nothing: 204 under the modular load manager
        (``NamespaceService.splitAndOwnBundleOnceAndRetry``), 500 under the extensible one
        (``ExtensibleLoadManagerImpl.splitNamespaceBundleAsync``'s IllegalStateException)."""
        config = self.effective
        algorithm = r.params.get("splitAlgorithmName") or str(
            config["defaultNamespaceBundleSplitAlgorithm"]
        )
        supported = [
            s.strip()
            for s in str(config["supportedNamespaceBundleSplitAlgorithms"]).split(",")
            if s.strip()
        ]
        if algorithm not in supported:
            return _reason(
                412,
                "Unsupported namespace bundle split algorithm, supported algorithms are "
                f"[{', '.join(supported)}]",  # a Java List's toString
            )
        try:
            positions = json.loads(r.body) if r.body.strip() else []
        except ValueError:
            return _reason(400, "The request body is not JSON")
        if not isinstance(positions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in positions
        ):
            return _reason(400, "The split boundaries must be a JSON array of integers")
        if algorithm == SplitAlgorithmName.SPECIFIED_POSITIONS_DIVIDE and not positions:
            return _reason(
                412,
                "With specified_positions_divide split algorithm, splitBoundaries must not be "
                "empty",
            )
        bundle = self._bundle(namespace, label)
        if not isinstance(bundle, str):
            return bundle
        if namespace in self.system:
            log.info("skip splitting heartbeat bundle %s", bundle)
            return NO_CONTENT
        owner = self.owners.get(bundle) or self._assign([bundle], "split").get(bundle)
        if owner is None:
            return _reason(503, f"No broker available to own {bundle}")
        if r.me != owner:
            return self._redirect(owner, r, authoritative="true")
        bounds = self.boundaries[namespace]
        index = bounds.index(int(label[2:10], 16))
        lower, upper = bounds[index], bounds[index + 1]
        try:
            _, cut = get_split_algorithm(algorithm)
            topics = [
                TopicLoad(
                    t["topic"],
                    topic_hash(t["topic"]),
                    t["msgRateIn"] + t["msgRateOut"],
                    t["msgThroughputIn"] + t["msgThroughputOut"],
                )
                for t in self._stats.get(bundle, {}).get("topicStats", [])
            ]
            cuts = cut(BundleRange(lower, upper), topics, positions, self._pulsar_config())
            if not cuts:
                # NamespaceService: "No valid boundary found", the split completes without
                # splitting (204); ExtensibleLoadManagerImpl.splitNamespaceBundleAsync fails
                # with an IllegalStateException instead, unmapped: a 500.
                log.info("no valid boundary found in %s to split it with %s", bundle, algorithm)
                if self.extensible:
                    return _unexpected(
                        "java.lang.IllegalStateException",
                        f"Bundle {bundle} not found under namespace",
                    )
                return NO_CONTENT
            new_bounds = split_boundaries(bounds, BundleRange(lower, upper), cuts)
        except BalancerError as exc:
            return _reason(412, f"Split bundle failed due to invalid request: {exc.message}")
        self.boundaries[namespace] = new_bounds
        del self.owners[bundle]
        self.short_term.pop(bundle, None)
        self.long_term.pop(bundle, None)
        self.samples.pop(bundle, None)
        self.recently_unloaded.pop(bundle, None)
        unload = r.params.get("unload", "false").lower() == "true" and not self.extensible
        children = []
        for a, b in itertools.pairwise(new_bounds[index : index + len(set(cuts)) + 2]):
            child = f"{namespace}/{format_hash(a)}_{format_hash(b)}"
            children.append(child)
            self.owners[child] = None if unload else owner
        self._refresh_stats(self._stats_minute)
        log.info(
            "split %s on %s into %s%s", bundle, owner, children, " (unloaded)" if unload else ""
        )
        return NO_CONTENT
