"""The OpenAPI schema's one addition to drf-spectacular: every operation's refusals have the one
error shape (``default``: any status not listed)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema

from console.api.responses.common import ErrorOutput


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's, with ``default``: ``ErrorOutput`` on every operation (every refusal,
    4xx or 5xx, is ``console.api.errors.error_body``)."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        bodies: dict[str, Any] = super()._get_response_bodies(direction)
        if "default" not in bodies:
            bodies["default"] = self._get_response_for_code(
                ErrorOutput, "default", direction=direction
            )
            bodies["default"]["description"] = "refused (4xx, 5xx): the one error shape"
        return bodies


def openapi_3_0(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """A postprocessing hook: the pydantic models' JSON Schema (the load report's) in OpenAPI
    3.0's words, so that the document validates: ``anyOf [X, {"type": "null"}]`` is X
    ``nullable``; ``propertyNames`` (not in 3.0) is said in the description."""

    def fix(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                fix(item)
            return
        if not isinstance(node, dict):
            return
        options = node.get("anyOf")
        if isinstance(options, list) and {"type": "null"} in options:
            rest = [o for o in options if o != {"type": "null"}]
            del node["anyOf"]
            if len(rest) == 1:
                node.update({k: v for k, v in rest[0].items() if k not in node})
            else:
                node["anyOf"] = rest
            node["nullable"] = True
        names = node.pop("propertyNames", None)
        if isinstance(names, dict):
            said = (
                f"keys at most {names['maxLength']} characters"
                if set(names) == {"maxLength"}
                else f"keys: {names}"
            )
            node["description"] = (
                f"{node['description']} ({said})" if "description" in node else said
            )
        for value in node.values():
            fix(value)

    fix(result.get("components", {}))
    return result
