"""The operator API's one parser: JSON only, already decoded by ``console.middleware.json_checked``
(``services.bodies.json_body``'s rules) before any view ran."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.parsers import BaseParser

from console.services.bodies import OPERATOR_BODY_MAX_BYTES, json_object


class StrictJSONParser(BaseParser):
    """``application/json`` only (form and multipart bodies are 415: they would read
    ``preview=true&preview=false`` as the last value). The middleware checked and decoded the
    body; a request that did not pass through it (a view called directly) is decoded here by
    the same rules."""

    media_type = "application/json"

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        request = (parser_context or {}).get("request")
        checked = getattr(getattr(request, "_request", None), "fulcrum_json", None)
        if checked is not None:
            return dict(checked)
        if stream is None:  # Content-Length: 0
            return {}
        return json_object(stream.read(OPERATOR_BODY_MAX_BYTES + 1))
