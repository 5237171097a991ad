"""How Fulcrum authenticates to a Pulsar cluster's admin API. No Django.

A ``TokenSource`` gives the bearer token of each request (``Authorization: Bearer <token>``,
Pulsar's ``AuthenticationProviderToken``); a TLS client certificate is the transport's business
(``PulsarAdmin``'s ``tls_cert_file``/``tls_key_file``, Pulsar's ``AuthenticationProviderTls``) and
may be combined with one of these or stand alone.

- ``StaticToken``: a JWT given once (an environment variable, or stored encrypted).
- ``TokenFile``: a file holding the JWT, re-read when it changes (its size, modification time or
  inode), so a token rotated on disk (a Kubernetes secret, Vault agent) is picked up without a
  restart — as Pulsar's ``AuthenticationToken`` does with ``file:`` tokens.
- ``OAuth2ClientCredentials``: Pulsar's ``AuthenticationOAuth2`` client-credentials flow
  (``org.apache.pulsar.client.impl.auth.oauth2.ClientCredentialsFlow``): the issuer's
  ``/.well-known/openid-configuration`` gives the token endpoint; the key file (JSON with
  ``client_id`` and ``client_secret``) and the audience are posted there as a form
  (``grant_type=client_credentials``, the secret in the body as Pulsar's ``TokenClient``
  sends it; ``audience`` and ``scope`` only when set); the access token is kept until
  ``early_expiry_s`` before it expires (Pulsar's own client waits for the expiry itself, or
  90 % of it in older releases), and fetched again then, or at once when a broker answers 401.
  The key file is read again at each fetch, as Pulsar does; its ``issuer_url`` is not used.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import httpx

WELL_KNOWN = "/.well-known/openid-configuration"


class AuthError(Exception):
    """Credentials that cannot be had: ``field`` names the setting (``token_file``,
    ``oauth2_key_file``, ``oauth2_issuer_url``), ``message`` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


class TokenSource(Protocol):
    """The bearer token of the next request."""

    #: What it is, for the Pulsar page ("token file /run/secrets/pulsar", "OAuth2 …").
    description: str

    def token(self) -> str | None:
        """The token to send now; None: no ``Authorization`` header.

        Raises:
            AuthError: the token cannot be had (file unreadable, issuer refused).
        """
        ...

    def invalidate(self) -> bool:
        """A broker answered 401: forget the token; True when a new one may differ (worth one
        retry)."""
        ...


@dataclass
class StaticToken:
    """A token given once: a 401 will not be cured by asking again."""

    value: str
    description: str = "bearer token"

    def token(self) -> str | None:
        return self.value or None

    def invalidate(self) -> bool:
        return False


@dataclass
class TokenFile:
    """A file holding the token (surrounding whitespace dropped), re-read when its size,
    modification time or inode changes — checked with one ``stat`` per request."""

    path: str
    description: str = ""
    _seen: tuple[int, int, int] | None = field(default=None, repr=False)
    _value: str = field(default="", repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.description = self.description or f"token file {self.path}"

    def token(self) -> str | None:
        try:
            stat = os.stat(self.path)
        except OSError as exc:
            raise AuthError(
                "token_file", f"the token file {self.path} cannot be read: {exc}"
            ) from None
        seen = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        with self._lock:
            if seen != self._seen:
                try:
                    text = Path(self.path).read_text(encoding="utf-8").strip()
                except (OSError, UnicodeDecodeError) as exc:
                    raise AuthError(
                        "token_file", f"the token file {self.path} cannot be read: {exc}"
                    ) from None
                if not text:
                    raise AuthError("token_file", f"the token file {self.path} is empty")
                self._value, self._seen = text, seen
            return self._value

    def invalidate(self) -> bool:
        with self._lock:
            self._seen = None  # read it again: it may have been rotated this very second
        return True


LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def checked_url(url: str, field: str) -> str:
    """``url`` when it is https (or http to this machine, for tests and a local issuer).

    Raises:
        AuthError: naming ``field``: not a URL, or http to another host (the client secret
            would travel in clear).
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise AuthError(field, f"{url!r} is not a URL: {exc}") from None
    if parsed.scheme == "https" and parsed.host:
        return url
    if parsed.scheme == "http" and parsed.host in LOOPBACK:
        return url
    raise AuthError(field, f"{url} must be https (the client secret is sent there)")


def read_key_file(where: str) -> dict[str, Any]:
    """Pulsar's OAuth2 key file: a path or a ``file://`` URL (``AuthenticationOAuth2``'s
    ``privateKey``), holding ``client_id`` and ``client_secret`` (``KeyFile``). Pulsar also
    takes a ``data:`` URL; Fulcrum does not, since it would keep the secret in its database.

    Raises:
        AuthError: naming ``oauth2_key_file``.
    """
    if where.startswith("data:"):
        raise AuthError(
            "oauth2_key_file",
            "a data: URL would keep the client secret in Fulcrum's database: give a file",
        )
    try:
        path = unquote(urlsplit(where).path) if where.startswith("file:") else where
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise AuthError("oauth2_key_file", f"the OAuth2 key file cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise AuthError("oauth2_key_file", "the OAuth2 key file is not a JSON object")
    for key in ("client_id", "client_secret"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise AuthError("oauth2_key_file", f"the OAuth2 key file has no {key}")
    return data


@dataclass
class OAuth2ClientCredentials:
    """Pulsar's OAuth2 client-credentials flow (module docstring).

    Args:
        issuer_url: the identity provider's issuer, e.g. ``https://auth.example.com/``.
        audience: the audience Pulsar's brokers expect (``tokenAudience``).
        key_file: where the client id and secret are (``read_key_file``).
        scope: optional, space-separated.
        early_expiry_s: a token is renewed this long before it expires (s).
        verify: TLS verification of the issuer (a context with the CA bundle, or True).
        transport: an httpx transport (tests).
        clock: seconds (tests).
    """

    issuer_url: str
    audience: str
    key_file: str
    scope: str = ""
    early_expiry_s: float = 30.0
    timeout_s: float = 10.0
    verify: Any = True
    transport: httpx.BaseTransport | None = None
    clock: Callable[[], float] = time.time
    description: str = ""
    _token: str = field(default="", repr=False)
    _renew_at: float = field(default=0.0, repr=False)
    _endpoint: str = field(default="", repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        checked_url(self.issuer_url, "oauth2_issuer_url")
        read_key_file(self.key_file)  # refused now rather than at the first request
        self.description = self.description or (
            f"OAuth2 client credentials from {self.issuer_url} (audience {self.audience})"
        )

    def token(self) -> str | None:
        with self._lock:
            if self._token and self.clock() < self._renew_at:
                return self._token
            self._token, life = self._fetch()
            # Renewed early_expiry_s before it expires, or at 90 % of a short life.
            self._renew_at = self.clock() + life - min(self.early_expiry_s, life / 10)
            return self._token

    def invalidate(self) -> bool:
        with self._lock:
            self._token, self._renew_at = "", 0.0
            self._endpoint = ""  # the issuer's metadata is read again too
        return True

    def _fetch(self) -> tuple[str, float]:
        """(a new access token, its life in s)."""
        key = read_key_file(self.key_file)
        try:
            return self._exchange(key)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise AuthError(
                "oauth2_issuer_url", f"the OAuth2 issuer could not be reached: {exc}"
            ) from None

    def _exchange(self, key: dict[str, Any]) -> tuple[str, float]:
        """(the access token, its life in s)."""
        with httpx.Client(
            transport=self.transport, timeout=self.timeout_s, verify=self.verify
        ) as client:
            if not self._endpoint:
                metadata = self._json(
                    client.get(self.issuer_url.rstrip("/") + WELL_KNOWN), "oauth2_issuer_url"
                )
                endpoint = metadata.get("token_endpoint")
                if not isinstance(endpoint, str) or not endpoint:
                    raise AuthError(
                        "oauth2_issuer_url",
                        f"{self.issuer_url}{WELL_KNOWN} names no token_endpoint",
                    )
                self._endpoint = checked_url(endpoint, "oauth2_issuer_url")
            form = {
                "grant_type": "client_credentials",
                "client_id": key["client_id"],
                "client_secret": key["client_secret"],
            }
            # TokenClient sends audience and scope only when they are set.
            if self.audience.strip():
                form["audience"] = self.audience
            if self.scope.strip():
                form["scope"] = self.scope
            body = self._json(
                client.post(self._endpoint, data=form, headers={"Accept": "application/json"}),
                "oauth2_key_file",
            )
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise AuthError("oauth2_key_file", f"{self._endpoint} answered no access_token")
        expires_in = body.get("expires_in")
        life = float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else 0.0
        # No expiry given: kept a minute, then asked again.
        return token, life or 60.0

    def _json(self, response: httpx.Response, where: str) -> dict[str, Any]:
        if response.status_code >= 400:
            raise AuthError(
                where,
                f"{response.request.method} {response.request.url} answered "
                f"{response.status_code}: {response.text[:200]}",
            )
        try:
            body = response.json()
        except ValueError:
            raise AuthError(where, f"{response.request.url} did not answer JSON") from None
        if not isinstance(body, dict):
            raise AuthError(where, f"{response.request.url} did not answer a JSON object")
        return body
