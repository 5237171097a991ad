"""The OpenAPI schema's one addition to drf-spectacular: every operation's refusals have the one
error shape (``default``: any status not listed)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's, with ``default``: ``ErrorOutput`` on every operation (every refusal,
    4xx or 5xx, is ``console.api.errors.error_body``)."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        # Imported here: DRF imports this module while its settings load, before the models.
        from console.api.responses.common import ErrorOutput

        bodies: dict[str, Any] = super()._get_response_bodies(direction)
        if "default" not in bodies:
            bodies["default"] = self._get_response_for_code(
                ErrorOutput, "default", direction=direction
            )
            bodies["default"]["description"] = "refused (4xx, 5xx): the one error shape"
        return bodies
