"""A thin client of Apache Pulsar's admin REST API (2.10 – 4.x), on httpx: what Fulcrum's
connector reads (brokers, leader, failure domains, namespaces and bundles, owners, load reports,
the load-balancer configuration) and does (unload with a destination, split with an algorithm,
dynamic configuration). No Django.

Pulsar's conventions it follows (``PULSAR_ADMIN.md`` §1, §4):

- the token as ``Authorization: Bearer <token>``;
- 307/308 redirects (to a bundle's owner, the leader, the named broker) followed here, re-sending
  the method, the body and the token, at most ``MAX_HOPS`` times (httpx drops the token across
  origins);
- errors as JSON ``{"reason": ...}`` or, for unmapped server exceptions, ``text/plain``; both
  become ``PulsarAdminError`` with the status and the reason;
- per-broker calls (load report, effective config) go to that broker's own web URL, built from
  its id (``host:port``) with the service URL's scheme when no better URL is known; the token
  never goes over http when the service URL is https;
- reads time out after ``read_timeout_s`` (10 s), unload and split after ``act_timeout_s``
  (90 s: a broker waits up to ``namespaceBundleUnloadingTimeoutMs``, 60 s, to close topics);
- at most ``concurrency`` requests at once (per-broker fan-out).
"""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar
from urllib.parse import quote, urljoin, urlsplit

import httpx

MAX_HOPS: Final = 5
REDIRECTS: Final = frozenset({307, 308})  # Pulsar's; a 303 would turn a PUT into a GET
T = TypeVar("T")
R = TypeVar("R")


class PulsarAdminSetupError(Exception):
    """A client that cannot be built: ``field`` (``tls_ca_file``) and ``message`` say why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


class PulsarAdminError(Exception):
    """A refused or failed admin call: ``status`` (HTTP; 0 when the broker was not reached),
    ``reason`` (Pulsar's, or the transport's), ``method`` and ``url``."""

    def __init__(self, status: int, reason: str, method: str, url: str) -> None:
        super().__init__(f"{method} {url}: {status or 'unreachable'} {reason}")
        self.status, self.reason, self.method, self.url = status, reason, method, url


def error_reason(response: httpx.Response) -> str:
    """Pulsar's reason for a failed call: ``{"reason": ...}`` (RestException), else the first
    line of a ``text/plain`` body after Pulsar's "unexpected error" banner, else the status
    phrase."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("reason"), str):
        return str(body["reason"])
    lines = [
        line.strip()
        for line in response.text.splitlines()
        if line.strip() and "An unexpected error occurred in the server" not in line
    ]
    return lines[0][:500] if lines else response.reason_phrase


def bundle_path(bundle: str) -> str:
    """``tenant/namespace/0x…_0x…`` -> the path segment ``tenant/namespace/0x…_0x…`` checked.

    Raises:
        ValueError: not a bundle name.
    """
    parts = bundle.split("/")
    if len(parts) != 3 or not all(parts) or "_" not in parts[2]:
        raise ValueError(f"not a bundle name (tenant/namespace/0x…_0x…): {bundle!r}")
    return "/".join(quote(p, safe="") for p in parts)


class PulsarAdmin:
    """One Pulsar cluster's admin API.

    Args:
        service_url: any broker's (or a proxy's) web URL, e.g. ``http://broker-1:8080``.
        token: a superuser's JWT, or None.
        broker_urls: broker id -> web URL, for per-broker calls (default ``http://<id>``).
        tls_ca_file: a CA bundle (PEM) that signs the brokers' certificates; None: the system's.
        transport: an httpx transport (tests).
    """

    def __init__(
        self,
        service_url: str,
        *,
        token: str | None = None,
        broker_urls: Mapping[str, str] | None = None,
        read_timeout_s: float = 10.0,
        act_timeout_s: float = 90.0,
        concurrency: int = 8,
        tls_ca_file: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.service_url = service_url.rstrip("/")
        self.broker_urls = dict(broker_urls or {})
        self.read_timeout_s, self.act_timeout_s = read_timeout_s, act_timeout_s
        self.concurrency = max(1, concurrency)
        self._slots = threading.BoundedSemaphore(self.concurrency)
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        verify: ssl.SSLContext | bool = True
        if tls_ca_file:
            try:
                verify = ssl.create_default_context(cafile=tls_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise PulsarAdminSetupError(
                    "tls_ca_file", f"the CA bundle {tls_ca_file} cannot be read: {exc}"
                ) from None
        self._secure = urlsplit(self.service_url).scheme == "https"
        self._client = httpx.Client(
            headers=headers,
            follow_redirects=False,
            transport=transport,
            timeout=read_timeout_s,
            verify=verify,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PulsarAdmin:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------------

    def broker_url(self, broker_id: str) -> str:
        """A broker's own web URL: known, or ``<scheme>://<id>`` (Pulsar's id is ``host:port``)
        with the service URL's scheme."""
        known = self.broker_urls.get(broker_id)
        if known:
            return known.rstrip("/")
        if broker_id.startswith(("http://", "https://")):
            return broker_id.rstrip("/")
        return f"{'https' if self._secure else 'http'}://{broker_id}"

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        broker: str | None = None,
        act: bool = False,
    ) -> httpx.Response:
        """Send one call and follow its redirects (≤ ``MAX_HOPS``), re-sending the method, body
        and token; ``broker``: to that broker's own URL.

        Raises:
            PulsarAdminError: a non-2xx answer (with Pulsar's reason), too many redirects, a
                redirect without ``Location``, or a broker that could not be reached.
        """
        base = self.broker_url(broker) if broker else self.service_url
        url = base + path
        if self._secure and urlsplit(url).scheme != "https":
            # Attached over https: the token is never sent in clear to a broker's http URL.
            raise PulsarAdminError(0, f"refused to send the token over {url}", method, url)
        timeout = (
            httpx.Timeout(self.read_timeout_s, read=self.act_timeout_s)
            if act
            else httpx.Timeout(self.read_timeout_s)
        )
        content = None if json_body is None else json.dumps(json_body).encode()
        headers = {"Content-Type": "application/json"} if json_body is not None else {}
        with self._slots:
            for _ in range(MAX_HOPS + 1):
                try:
                    response = self._client.request(
                        method,
                        url,
                        params=params,
                        content=content,
                        headers=headers,
                        timeout=timeout,
                    )
                except httpx.HTTPError as exc:
                    raise PulsarAdminError(0, f"{type(exc).__name__}: {exc}", method, url) from exc
                if response.status_code not in REDIRECTS:
                    break
                location = response.headers.get("location")
                if not location:
                    raise PulsarAdminError(
                        response.status_code, "a redirect without Location", method, url
                    )
                # The Location carries the query Pulsar wants (authoritative=...): send it as is.
                target = urljoin(url, location)
                scheme, before = urlsplit(target).scheme, urlsplit(url).scheme
                if scheme not in ("http", "https") or (before == "https" and scheme != "https"):
                    # The token never goes to another scheme, nor from https down to http.
                    raise PulsarAdminError(
                        response.status_code, f"a redirect to {target} refused", method, url
                    )
                url, params = target, None
            else:
                raise PulsarAdminError(
                    response.status_code, f"more than {MAX_HOPS} redirects", method, url
                )
        if response.status_code >= 400:
            raise PulsarAdminError(response.status_code, error_reason(response), method, url)
        return response

    def get_object(self, path: str, *, broker: str | None = None) -> dict[str, Any]:
        """GET ``path``: a JSON object (an empty body: {}).

        Raises:
            PulsarAdminError: as ``get_json``, or a body that is not a JSON object.
        """
        body = self.get_json(path, broker=broker)
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise PulsarAdminError(200, f"{path}: not a JSON object", "GET", self.service_url)
        return body

    def get_list(self, path: str, *, broker: str | None = None) -> list[Any]:
        """GET ``path``: a JSON array (an empty body: []).

        Raises:
            PulsarAdminError: as ``get_json``, or a body that is not a JSON array.
        """
        body = self.get_json(path, broker=broker)
        if body is None:
            return []
        if not isinstance(body, list):
            raise PulsarAdminError(200, f"{path}: not a JSON array", "GET", self.service_url)
        return body

    def get_json(self, path: str, *, broker: str | None = None) -> Any:
        """GET ``path`` as JSON.

        Raises:
            PulsarAdminError: as ``request``, or a body that is not JSON.
        """
        response = self.request("GET", path, broker=broker)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise PulsarAdminError(
                response.status_code, "the answer is not JSON", "GET", str(response.url)
            ) from None

    def each(
        self, items: Iterable[T], call: Callable[[T], R]
    ) -> list[tuple[T, R | PulsarAdminError]]:
        """``call`` on every item, at most ``concurrency`` at once; each result or its error."""

        def one(item: T) -> tuple[T, R | PulsarAdminError]:
            try:
                return item, call(item)
            except PulsarAdminError as exc:
                return item, exc

        items = list(items)
        if len(items) <= 1:
            return [one(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(one, items))

    # -- observe (read-only: nothing here assigns a bundle) -------------------------------------

    def clusters(self) -> list[str]:
        """E1: the cluster names."""
        return [str(c) for c in self.get_list("/admin/v2/clusters")]

    def brokers(self, cluster: str) -> list[str]:
        """E2: the active brokers' ids (``host:port``)."""
        return sorted(str(b) for b in self.get_list(f"/admin/v2/brokers/{quote(cluster, safe='')}"))

    def leader(self) -> dict[str, Any]:
        """E3: ``{"serviceUrl", "brokerId" (≥ 3.x)}``."""
        return self.get_object("/admin/v2/brokers/leaderBroker")

    def owned_bundles(self, cluster: str, broker_id: str) -> dict[str, dict[str, Any]]:
        """E4: bundle name -> ownership status, of one broker (redirected to it)."""
        path = (
            f"/admin/v2/brokers/{quote(cluster, safe='')}/{quote(broker_id, safe=':')}"
            "/ownedNamespaces"
        )
        return self.get_object(path)

    def failure_domains(self, cluster: str) -> dict[str, list[str]]:
        """E5: domain -> broker ids."""
        domains = self.get_object(f"/admin/v2/clusters/{quote(cluster, safe='')}/failureDomains")
        return {
            str(name): [str(b) for b in value.get("brokers", [])]
            for name, value in domains.items()
            if isinstance(value, dict) and isinstance(value.get("brokers", []), list)
        }

    def tenants(self) -> list[str]:
        """E6."""
        return [str(t) for t in self.get_list("/admin/v2/tenants")]

    def namespaces(self, tenant: str) -> list[str]:
        """E7: ``tenant/namespace`` names."""
        return [str(n) for n in self.get_list(f"/admin/v2/namespaces/{quote(tenant, safe='')}")]

    def bundle_boundaries(self, namespace: str) -> list[str]:
        """E8: the namespace's boundaries, ``["0x00000000", …, "0xffffffff"]``."""
        data = self.get_object(f"/admin/v2/namespaces/{namespace}/bundles")
        boundaries = data.get("boundaries", [])
        if not isinstance(boundaries, list):
            raise PulsarAdminError(200, f"{namespace}: boundaries not a list", "GET", namespace)
        return [str(b) for b in boundaries]

    def anti_affinity_group(self, namespace: str) -> str | None:
        """E9: the namespace's anti-affinity group; None when unset (204 or an empty body)."""
        response = self.request("GET", f"/admin/v2/namespaces/{namespace}/antiAffinity")
        text = response.text.strip()
        if response.status_code == 204 or not text:
            return None
        if text.startswith('"'):
            with contextlib.suppress(ValueError):
                text = str(response.json())
        return text or None

    def load_report(self, broker_id: str) -> dict[str, Any]:
        """E11 on the broker itself: the modular load manager's ``LocalBrokerData``.

        Raises:
            PulsarAdminError: 500 under the extensible load manager, which serves no report.
        """
        return self.get_object("/admin/v2/broker-stats/load-report", broker=broker_id)

    def topic_stats(self, broker_id: str) -> dict[str, Any]:
        """E12 on the broker itself: namespace -> bundle range -> persistent|non-persistent ->
        topic -> stats (msgRateIn/Out msg/s, msgThroughputIn/Out bytes/s, ...)."""
        return self.get_object("/admin/v2/broker-stats/topics", broker=broker_id)

    def metrics(self, broker_id: str) -> str:
        """E14 on the broker itself: its Prometheus text exposition."""
        return self.request("GET", "/metrics", broker=broker_id).text

    def dynamic_config_names(self) -> list[str]:
        """E15: the configuration keys this cluster lets E18 change at runtime."""
        return [str(k) for k in self.get_list("/admin/v2/brokers/configuration")]

    def runtime_config(self, broker_id: str | None = None) -> dict[str, str]:
        """E17: every effective configuration value (strings), of one broker or any."""
        runtime = self.get_object("/admin/v2/brokers/configuration/runtime", broker=broker_id)
        return {str(k): str(v) for k, v in runtime.items()}

    def dynamic_overrides(self) -> dict[str, str]:
        """E16: the dynamic configuration's overrides (strings)."""
        return {
            str(k): str(v)
            for k, v in self.get_object("/admin/v2/brokers/configuration/values").items()
        }

    # -- act ------------------------------------------------------------------------------------

    def unload(self, bundle: str, destination: str | None = None) -> None:
        """A1: unload ``bundle``; with ``destination`` (a broker id; Pulsar ≥ 3.0) the next
        owner. A 204 does not say it moved (an unowned bundle answers 204 too): observe after.

        Raises:
            ValueError: not a bundle name. PulsarAdminError: Pulsar's refusal (409 an inactive
                destination, 412 a bundle that no longer exists, ...).
        """
        params = {"destinationBroker": destination} if destination else None
        self.request(
            "PUT", f"/admin/v2/namespaces/{bundle_path(bundle)}/unload", params=params, act=True
        )

    def split(
        self,
        bundle: str,
        algorithm: str,
        boundaries: list[int] | None = None,
        *,
        unload: bool = False,
    ) -> None:
        """A2: split ``bundle`` with ``algorithm`` (``boundaries``, hash positions, for
        specified_positions_divide, sent as the JSON body; an empty JSON body otherwise).

        Raises:
            ValueError: not a bundle name. PulsarAdminError: 412 an algorithm the cluster does
                not support, ...
        """
        params = {"unload": "true" if unload else "false", "splitAlgorithmName": algorithm}
        self.request(
            "PUT",
            f"/admin/v2/namespaces/{bundle_path(bundle)}/split",
            params=params,
            json_body=list(boundaries or []),
            act=True,
        )

    def set_dynamic_config(self, name: str, value: str) -> None:
        """E18: set one dynamic configuration value, cluster-wide (the value is a path
        segment, escaped).

        Raises:
            PulsarAdminError: 412 a value or a key that is not dynamic.
        """
        self.request(
            "POST",
            f"/admin/v2/brokers/configuration/{quote(name, safe='')}/{quote(value, safe='')}",
        )

    def delete_dynamic_config(self, name: str) -> None:
        """E19: remove an override (the broker.conf value applies after a restart)."""
        self.request("DELETE", f"/admin/v2/brokers/configuration/{quote(name, safe='')}")


def broker_host(url: str) -> str:
    """``http://broker-1:8080`` -> ``broker-1:8080`` (Pulsar's broker id form)."""
    parts = urlsplit(url)
    return parts.netloc or url
