"""A thin client of Apache Pulsar's admin REST API (2.10 – 4.x), on httpx: what Fulcrum's
connector reads (brokers, leader, failure domains, namespaces and bundles, owners, load reports,
the load-balancer configuration) and does (unload with a destination, split with an algorithm,
dynamic configuration). No Django.

Pulsar's conventions it follows (``PULSAR_REALITY.md`` §2–§3, ``PULSAR_ADMIN.md`` §1, §4):

- authentication by a bearer token from a ``TokenSource`` (``console.pulsar.auth``: a JWT, a
  token file re-read when it changes, OAuth2 client credentials), re-asked once after a 401
  when it can change; and/or a TLS client certificate;
- 307/308 redirects (to a bundle's owner, the leader, the named broker, the local cluster)
  followed here, re-sending the method, the body and the token, at most ``MAX_HOPS`` times
  (httpx drops the token across origins); any other 3xx is an error naming its status (Pulsar
  sends none: a 302 or 303 comes from something in between and would turn a PUT into a GET);
- errors as JSON ``{"reason": ...}`` or, for unmapped server exceptions, ``text/plain``; both
  become ``PulsarAdminError`` with the status and the reason;
- per-broker calls (load report, topic stats, ``/metrics``) go to that broker's own web URL:
  the one Pulsar itself redirected to (``maybeRedirectToBroker`` picks ``webServiceUrlTls``
  for an https request), or ``http://<id>`` over http (Pulsar's broker id is
  ``advertisedAddress:webServicePort``). Over https the URL is never guessed from the id,
  whose port is the http one whenever both are enabled; the token never goes over http when
  the service URL is https;
- reads time out after ``read_timeout_s`` (10 s), unload and split after ``act_timeout_s``
  (90 s: a broker waits up to ``namespaceBundleUnloadingTimeoutMs``, 60 s, to close topics);
- at most ``concurrency`` requests at once, and a fan-out over brokers (``each``) waits at most
  ``deadline_s`` for all of them: a broker that has not answered by then is reported as such
  and the pass goes on without it.
"""

from __future__ import annotations

import contextlib
import json
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ALL_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Final, TypeVar
from urllib.parse import quote, urljoin, urlsplit

import httpx

from console.pulsar.auth import AuthError, StaticToken, TokenSource

MAX_HOPS: Final = 5
REDIRECTS: Final = frozenset({307, 308})  # Pulsar's; a 303 would turn a PUT into a GET
T = TypeVar("T")
R = TypeVar("R")


class PulsarAdminSetupError(Exception):
    """A client that cannot be built: ``field`` (``tls_ca_file``) and ``message`` say why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


class UnknownBrokerUrl(Exception):
    """A broker whose own https URL Pulsar has not told (no redirect to it yet): never
    guessed."""


class PulsarAdminError(Exception):
    """A refused or failed admin call: ``status`` (HTTP; 0 when no answer came), ``reason``
    (Pulsar's, or the transport's), ``method`` and ``url``. ``reached`` is False only when the
    call certainly never reached a broker that could act on it (no connection could be opened,
    no token, an https URL not known): such a call may be sent again without doing anything
    twice. A timeout, a dropped connection or a 5xx may have been acted on: ``reached``."""

    def __init__(
        self, status: int, reason: str, method: str, url: str, *, reached: bool = True
    ) -> None:
        super().__init__(f"{method} {url}: {status or 'unreachable'} {reason}")
        self.status, self.reason, self.method, self.url = status, reason, method, url
        self.reached = reached


# httpx errors raised before a request was written: nothing reached a broker.
NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.InvalidURL)
# A connection that broke before any answer came back (most often a kept-alive one the server
# closed as the request went out): a GET is sent once more on a fresh one, as it changes nothing
# (RFC 9110 §9.2.2, idempotent methods; browsers and urllib3's Retry do the same). Any other
# method is not: it may have been acted on.
BROKEN_BEFORE_ANSWER: Final = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)

# Admin call names (as PULSAR_ADMIN.md numbers them), by the path they call: what the Pulsar
# page and /metrics group calls by. First match wins.
_CALLS: Final = tuple(
    (re.compile(pattern), name)
    for pattern, name in (
        (r"/unload$", "A1 unload"),
        (r"/split$", "A2 split"),
        (r"^/admin/v2/clusters/[^/]+/failureDomains", "E5 failure domains"),
        (r"^/admin/v2/clusters", "E1 clusters"),
        (r"^/admin/v2/brokers/leaderBroker", "E3 leader"),
        (r"/ownedNamespaces$", "E4 owned bundles"),
        (r"^/admin/v2/brokers/configuration/runtime", "E17 runtime configuration"),
        (r"^/admin/v2/brokers/configuration/values", "E16 dynamic overrides"),
        (r"^/admin/v2/brokers/configuration/", "E18/E19 set dynamic configuration"),
        (r"^/admin/v2/brokers/configuration$", "E15 dynamic configuration names"),
        (r"^/admin/v2/brokers/", "E2 brokers"),
        (r"^/admin/v2/tenants", "E6 tenants"),
        (r"/bundles$", "E8 bundle boundaries"),
        (r"/antiAffinity$", "E9 anti-affinity group"),
        (r"^/admin/v2/namespaces/[^/]+$", "E7 namespaces"),
        (r"^/admin/v2/broker-stats/load-report", "E11 load report"),
        (r"^/admin/v2/broker-stats/topics", "E12 topic stats"),
        (r"^/metrics", "E14 metrics"),
    )
)


def call_name(path: str) -> str:
    """The admin call ``path`` makes, as PULSAR_ADMIN.md names it (``"E4 owned bundles"``);
    ``"other"`` for a path not listed."""
    for pattern, name in _CALLS:
        if pattern.search(path):
            return name
    return "other"


@dataclass(frozen=True)
class CallRecord:
    """One admin call as made: ``broker`` (the ``host:port`` that answered or failed),
    ``call`` (``call_name``), ``result`` ("ok", "4xx", "5xx", "timeout", "unreachable"),
    ``seconds`` (wall time, redirects and a token renewal included), ``reason`` (a failure's),
    ``size`` (bytes of the answer's body)."""

    broker: str
    call: str
    result: str
    seconds: float
    reason: str = ""
    size: int = 0


def error_reason(response: httpx.Response) -> str:
    """Pulsar's reason for a failed call: ``{"reason": ...}`` (RestException), else the title of
    an HTML error page (Jetty's, e.g. a 401), else the first line of a ``text/plain`` body after
    Pulsar's "unexpected error" banner, else the status phrase."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("reason"), str):
        return str(body["reason"])
    if "html" in response.headers.get("content-type", ""):
        # Jetty's own error page (a 401 from the authentication filter): its title.
        title = re.search(r"<title>(.*?)</title>", response.text, re.IGNORECASE | re.DOTALL)
        return title.group(1).strip()[:500] if title else response.reason_phrase
    lines = [
        line.strip()
        for line in response.text.splitlines()
        if line.strip() and "An unexpected error occurred in the server" not in line
    ]
    return lines[0][:500] if lines else response.reason_phrase


def _json_of(response: httpx.Response) -> Any:
    """A successful answer's JSON; None for 204 or an empty body.

    Raises:
        PulsarAdminError: a body that is not JSON.
    """
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise PulsarAdminError(
            response.status_code, "the answer is not JSON", "GET", str(response.url)
        ) from None


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
        token: a superuser's JWT, or None (a shortcut for ``auth=StaticToken(token)``).
        auth: where each request's bearer token comes from (``console.pulsar.auth``).
        broker_urls: broker id -> its own web URL (``scheme://host:port``), as learned before.
        read_timeout_s: a read call's timeout (s); act_timeout_s: unload's and split's (s).
        concurrency: requests in flight at once; deadline_s: how long a fan-out over brokers
            (``each``) waits for all of them (s).
        tls_ca_file: a CA bundle (PEM) that signs the brokers' certificates; None: the system's.
        tls_cert_file, tls_key_file: a client certificate and its key (PEM), for brokers that
            authenticate by TLS (``AuthenticationProviderTls``).
        transport: an httpx transport (tests).

    Raises:
        PulsarAdminSetupError: a CA bundle or client certificate that cannot be read, named.
    """

    def __init__(
        self,
        service_url: str,
        *,
        token: str | None = None,
        auth: TokenSource | None = None,
        broker_urls: Mapping[str, str] | None = None,
        read_timeout_s: float = 10.0,
        act_timeout_s: float = 90.0,
        concurrency: int = 8,
        deadline_s: float = 30.0,
        tls_ca_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.service_url = service_url.rstrip("/")
        self.broker_urls = {k: v.rstrip("/") for k, v in (broker_urls or {}).items() if v}
        self.read_timeout_s, self.act_timeout_s = read_timeout_s, act_timeout_s
        self.concurrency = max(1, concurrency)
        self.deadline_s = deadline_s
        self.auth: TokenSource | None = auth or (StaticToken(token) if token else None)
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._learned = threading.Lock()
        self._counted = threading.Lock()
        self.calls = 0  # HTTP requests sent (each redirect hop counts), for the Pulsar page
        # Every call made (``request``), with its result and time, for the Pulsar page and
        # /metrics; the caller reads and clears it (``calls_taken``).
        self.call_log: list[CallRecord] = []
        self.verify = tls_context(tls_ca_file, tls_cert_file, tls_key_file)
        self._secure = urlsplit(self.service_url).scheme == "https"
        self._client = httpx.Client(
            headers={"Accept": "application/json"},
            follow_redirects=False,
            transport=transport,
            timeout=read_timeout_s,
            verify=self.verify,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PulsarAdmin:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------------

    @property
    def is_secure(self) -> bool:
        """Attached over https: per-broker URLs are https too, and never guessed."""
        return self._secure

    def learned(self) -> dict[str, str]:
        """A copy of broker id -> its own web URL, as known now."""
        with self._learned:
            return dict(self.broker_urls)

    def broker_url(self, broker_id: str) -> str:
        """A broker's own web URL: the one Pulsar named (``learn``), else over http
        ``http://<id>`` (Pulsar's id is ``advertisedAddress:webServicePort``).

        Raises:
            UnknownBrokerUrl: attached over https and Pulsar has not named the broker's https
                URL yet (the id's port is the http one whenever http is enabled).
        """
        with self._learned:
            known = self.broker_urls.get(broker_id)
        if known:
            return known
        if broker_id.startswith(("http://", "https://")):
            return broker_id.rstrip("/")
        if self._secure:
            raise UnknownBrokerUrl(broker_id)
        return f"http://{broker_id}"

    def learn(self, broker_id: str, url: str) -> None:
        """Remember ``url``'s ``scheme://host:port`` as ``broker_id``'s own (the broker Pulsar
        redirected to, or that answered for itself); an http URL is ignored when attached over
        https."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return
        if self._secure and parts.scheme != "https":
            return
        with self._learned:
            self.broker_urls[broker_id] = f"{parts.scheme}://{parts.netloc}"

    def calls_taken(self) -> list[CallRecord]:
        """The calls recorded since the last time, and forget them."""
        with self._counted:
            taken, self.call_log = self.call_log, []
        return taken

    def _authorization(self, method: str, url: str) -> dict[str, str]:
        if self.auth is None:
            return {}
        try:
            token = self.auth.token()
        except AuthError as exc:
            raise PulsarAdminError(
                0, f"{self.auth.description}: {exc.message}", method, url, reached=False
            ) from None
        if not token:
            return {}
        # As Pulsar's AuthenticationDataToken/OAuth2: the broker picks its token provider.
        return {"Authorization": f"Bearer {token}", "X-Pulsar-Auth-Method-Name": "token"}

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        broker: str | None = None,
        act: bool = False,
        empty_json: bool = False,
    ) -> httpx.Response:
        """Send one call (``empty_json``: an empty body typed ``application/json``, as Pulsar's
        Java admin client sends a PUT without entity) and follow its redirects (≤
        ``MAX_HOPS``), re-sending the method, body and token; ``broker``: to that broker's own
        URL. A 401 is tried once more with a fresh
        token when the token source can renew it. ``response.url`` is the URL that answered.

        Raises:
            PulsarAdminError: a non-2xx answer (with Pulsar's reason), a 3xx other than 307/308,
                too many redirects, a redirect without ``Location``, a broker that could not be
                reached, a broker whose https URL is not known, or no token to be had.
        """
        started = time.monotonic()
        try:
            response = self._request(
                method, path, params, json_body, broker, act=act, empty_json=empty_json
            )
        except PulsarAdminError as exc:
            if exc.status >= 500:
                result = "5xx"
            elif exc.status >= 400:
                result = "4xx"
            elif exc.reached and "Timeout" in exc.reason:
                result = "timeout"
            else:
                result = "unreachable" if not exc.reached else "no answer"
            self._record(exc.url, path, result, started, exc.reason)
            raise
        self._record(str(response.url), path, "ok", started, size=len(response.content))
        return response

    def _record(
        self, url: str, path: str, result: str, started: float, reason: str = "", size: int = 0
    ) -> None:
        netloc = urlsplit(url).netloc or url.split("/", 1)[0]
        record = CallRecord(
            netloc, call_name(path), result, time.monotonic() - started, reason[:300], size
        )
        with self._counted:
            self.call_log.append(record)

    def _request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        json_body: Any,
        broker: str | None,
        *,
        act: bool,
        empty_json: bool,
    ) -> httpx.Response:
        try:
            base = self.broker_url(broker) if broker else self.service_url
        except UnknownBrokerUrl:
            raise PulsarAdminError(
                0,
                f"the https URL of broker {broker} is not known yet (Pulsar names it when it "
                "redirects to that broker; the id's port is its http port): not guessed",
                method,
                f"{broker}{path}",
                reached=False,
            ) from None
        url = base + path
        if self._secure and urlsplit(url).scheme != "https":
            # Attached over https: the token is never sent in clear to a broker's http URL.
            raise PulsarAdminError(
                0, f"refused to send the token over {url}", method, url, reached=False
            )
        timeout = (
            httpx.Timeout(self.read_timeout_s, read=self.act_timeout_s)
            if act
            else httpx.Timeout(self.read_timeout_s)
        )
        content = None if json_body is None else json.dumps(json_body).encode()
        if empty_json and content is None:
            content = b""
        with self._slots:
            response = self._follow(method, url, params, content, timeout)
            if response.status_code == 401 and self.auth is not None and self.auth.invalidate():
                response = self._follow(method, url, params, content, timeout)
        if response.status_code >= 400:
            raise PulsarAdminError(
                response.status_code, error_reason(response), method, str(response.url)
            )
        return response

    def _send(
        self,
        method: str,
        url: str,
        params: Mapping[str, str] | None,
        content: bytes | None,
        headers: dict[str, str],
        timeout: httpx.Timeout,
    ) -> httpx.Response:
        """One HTTP request, counted; a GET whose connection broke before any answer is sent
        once more (``BROKEN_BEFORE_ANSWER``)."""
        for attempt in (1, 2):
            with self._counted:
                self.calls += 1
            try:
                return self._client.request(
                    method, url, params=params, content=content, headers=headers, timeout=timeout
                )
            except BROKEN_BEFORE_ANSWER:
                if method != "GET" or attempt == 2:
                    raise
        raise AssertionError("a request is sent at most twice")

    def _follow(
        self,
        method: str,
        url: str,
        params: Mapping[str, str] | None,
        content: bytes | None,
        timeout: httpx.Timeout,
    ) -> httpx.Response:
        headers = self._authorization(method, url)
        if content is not None:
            headers["Content-Type"] = "application/json"
        for _ in range(MAX_HOPS + 1):
            try:
                response = self._send(method, url, params, content, headers, timeout)
            except NOT_SENT as exc:
                raise PulsarAdminError(
                    0, f"{type(exc).__name__}: {exc}", method, url, reached=False
                ) from exc
            except httpx.HTTPError as exc:  # written, perhaps acted on: the answer was lost
                raise PulsarAdminError(0, f"{type(exc).__name__}: {exc}", method, url) from exc
            if 300 <= response.status_code < 400 and response.status_code not in REDIRECTS:
                raise PulsarAdminError(
                    response.status_code,
                    f"HTTP {response.status_code} {response.reason_phrase} to "
                    f"{response.headers.get('location', 'nowhere')}: Pulsar redirects with 307 "
                    "or 308 only, so this comes from something in between; not followed",
                    method,
                    url,
                )
            if response.status_code not in REDIRECTS:
                return response
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
        raise PulsarAdminError(response.status_code, f"more than {MAX_HOPS} redirects", method, url)

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
        """GET ``path`` as JSON (None for an empty body).

        Raises:
            PulsarAdminError: as ``request``, or a body that is not JSON.
        """
        return _json_of(self.request("GET", path, broker=broker))

    def each(
        self,
        items: Iterable[T],
        call: Callable[[T], R],
        *,
        deadline_s: float | None = None,
        method: str = "GET",
    ) -> list[tuple[T, R | PulsarAdminError]]:
        """``call`` on every item, at most ``concurrency`` at once; each result or its error.
        Items not done within ``deadline_s`` (default ``self.deadline_s``) get an error saying
        so (``method`` names the call in it), and are not waited for: their calls end at their
        own timeouts, and what they return then is dropped."""

        def one(item: T) -> R | PulsarAdminError:
            try:
                return call(item)
            except PulsarAdminError as exc:
                return exc

        items = list(items)
        if len(items) <= 1:
            return [(i, one(i)) for i in items]
        limit = self.deadline_s if deadline_s is None else deadline_s
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(items)))
        try:
            futures = [pool.submit(one, item) for item in items]
            wait(futures, timeout=limit, return_when=ALL_COMPLETED)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        out: list[tuple[T, R | PulsarAdminError]] = []
        for item, future in zip(items, futures, strict=True):
            if future.done() and not future.cancelled():
                error = future.exception()
                result = (
                    future.result()
                    if error is None
                    else PulsarAdminError(0, f"{type(error).__name__}: {error}", method, str(item))
                )
                out.append((item, result))
            else:
                late = f"no answer within {limit:.1f} s (the deadline)"
                out.append((item, PulsarAdminError(0, late, method, str(item))))
        return out

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

    def owned_bundles(
        self, cluster: str, broker_id: str, *, via: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """E4: bundle name -> ownership status, of one broker, asked of the service URL (or of
        the broker ``via``), which redirects to it (``maybeRedirectToBroker``). When it did, the
        broker's own URL is learned from the redirect's target (Pulsar picks
        ``webServiceUrlTls`` for an https request); an answer without a redirect says nothing
        of it (the service URL may be a load balancer or a proxy).

        Raises:
            PulsarAdminError: as ``request``, or a body that is not a JSON object.
        """
        path = (
            f"/admin/v2/brokers/{quote(cluster, safe='')}/{quote(broker_id, safe=':')}"
            "/ownedNamespaces"
        )
        response = self.request("GET", path, broker=via)
        asked = self.broker_url(via) if via else self.service_url
        answered = str(response.url)
        if urlsplit(answered).netloc != urlsplit(asked).netloc:  # Pulsar redirected to it
            self.learn(broker_id, answered)
        body = _json_of(response)
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise PulsarAdminError(200, f"{path}: not a JSON object", "GET", answered)
        return body

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
            "PUT",
            f"/admin/v2/namespaces/{bundle_path(bundle)}/unload",
            params=params,
            act=True,
            empty_json=True,
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


def tls_context(
    ca_file: str | None, cert_file: str | None = None, key_file: str | None = None
) -> ssl.SSLContext | bool:
    """httpx's ``verify``: the system's CAs (True) or a context with ``ca_file``, carrying the
    client certificate ``cert_file`` (and its ``key_file``, when not in the same PEM).

    Raises:
        PulsarAdminSetupError: a file that cannot be read, naming ``tls_ca_file`` or
            ``tls_cert_file``.
    """
    if not (ca_file or cert_file):
        return True
    try:
        context = ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError) as exc:
        raise PulsarAdminSetupError(
            "tls_ca_file", f"the CA bundle {ca_file} cannot be read: {exc}"
        ) from None
    if cert_file:

        def no_password() -> str:
            # An encrypted key would make OpenSSL ask on the terminal: refused instead.
            raise ssl.SSLError("the key is encrypted; give an unencrypted key file")

        try:
            context.load_cert_chain(cert_file, key_file or None, password=no_password)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise PulsarAdminSetupError(
                "tls_cert_file",
                f"the client certificate {cert_file} (key {key_file or 'in the same file'}) "
                f"cannot be read: {exc}",
            ) from None
    return context
