"""Request bodies decoded strictly, one rule for every JSON endpoint (load reports and the
operator API): a size limit (413), no key given twice in one object, no nesting past jiter's
limit, no NaN or infinity, no text that is not UTF-8 and no lone UTF-16 surrogate (jiter refuses
both), each a 400 naming the key."""

from __future__ import annotations

import math
import re
from typing import Any

import jiter

from console.errors import ConsoleError

# jiter's words for a key given twice in one object, and for nesting past its limit (200 levels).
_DUPLICATE_KEY = re.compile(r'Detected duplicate key "(.*)" at line \d+ column \d+$')
_TOO_DEEP = "recursion limit exceeded"


# Protects a web process's memory: the largest real operator body (a strategy config with its
# reason) is under 4 KB; a megabyte is room for anything honest and refuses a 10 MB flood.
OPERATOR_BODY_MAX_BYTES = 1024 * 1024


def body_size_check(size: int, *, limit: int, what: str) -> None:
    """Refuse a body of ``size`` bytes over ``limit`` bytes.

    Raises:
        ConsoleError: 413, e.g. "a load report is at most 4,194,304 bytes (got 10,485,760)".
    """
    if size > limit:
        raise ConsoleError(
            f"{what} is at most {limit:,} bytes (got {size:,})", status=413, field="body"
        )


def json_body(
    raw: bytes, *, limit: int, what: str = "a request body", finite_check: bool = True
) -> Any:
    """``raw`` decoded as one JSON document: dicts, lists, str, int, float, bool, None.

    Stricter than ``json.loads`` where laxness would hide an operator's mistake or crash a
    process: ``{"preview": true, "preview": false}`` is refused, not read as the last value.

    Raises:
        ConsoleError: 413 over ``limit`` bytes; 400 (field ``body`` or the key at fault) for
        text that is not JSON, a duplicate key, nesting deeper than 200 levels, NaN or
        infinity (``1e999`` included; not looked for with ``finite_check=False``, for callers
        whose schema checks every number anyway), text that is not UTF-8, or a lone UTF-16
        surrogate in a string.
    """
    body_size_check(len(raw), limit=limit, what=what)
    try:
        doc = jiter.from_json(raw, catch_duplicate_keys=True)
    except ValueError as exc:
        message = str(exc)
        duplicate = _DUPLICATE_KEY.match(message)
        if duplicate:
            key = duplicate.group(1)
            raise ConsoleError(f"{key!r} appears twice", field=key) from None
        if message.startswith(_TOO_DEEP):
            raise ConsoleError(
                "the JSON document is nested deeper than 200 levels", field="body"
            ) from None
        raise ConsoleError(f"not a JSON document: {message[:200]}", field="body") from None
    if finite_check:  # NaN and Infinity parsed first, so that the error names their key
        _finite_check(doc, "body")
    return doc


def json_object(raw: bytes) -> dict[str, Any]:
    """An operator API body: empty (``{}``) or one JSON object, by ``json_body``'s rules, at
    most ``OPERATOR_BODY_MAX_BYTES``.

    Raises:
        ConsoleError: 413 / 400 as ``json_body``; 400 for a list, string, number or null.
    """
    if not raw.strip():
        return {}
    doc = json_body(raw, limit=OPERATOR_BODY_MAX_BYTES, what="an API request body")
    if not isinstance(doc, dict):
        kind = "null" if doc is None else type(doc).__name__
        raise ConsoleError(f"the body must be a JSON object (got {kind})", field="body")
    return doc


def _finite_check(value: Any, where: str) -> None:
    """Every number in ``value`` finite (depth <= 200: jiter's limit)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConsoleError(f"{where}: numbers must be finite (got {value})", field=where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _finite_check(item, key if where == "body" else f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _finite_check(item, f"{where}[{index}]")
