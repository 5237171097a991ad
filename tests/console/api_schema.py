"""The API's OpenAPI schema as the tests read it: the document drf-spectacular serves, where an
answer's schema leaves its values untyped, and a check of one answer against the schema."""

import functools
import json
from collections.abc import Iterator
from typing import Any

# Values whose shape is open by nature, each with why: the walk allows these and nothing else.
FREE_FORM = {
    "CyclePlanOutput.state": "strategy name -> what it remembers, each strategy its own",
    "StoredPlanOutput.state": "the same, in a decision's stored plan",
    "SheddingOutput.stats": "each shedder's own figures",
    "ConfigVersionOutput.changes{}[]": "a setting's old or new value, of that setting's type",
    "ConnectionOutput.observation": "the Pulsar pass's summary, kept as it wrote it",
    "ReportResultsOutput.rows[]": "a row of one of six results, its columns (Spark drops nulls)",
    "OpenApiDocumentOutput.paths{}": "OpenAPI's own path items",
    "OpenApiDocumentOutput.components": "OpenAPI's own components",
}


@functools.cache
def document() -> dict[str, Any]:
    """The schema /api/schema/ serves, as JSON."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    generated = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(generated))


def is_free_form(schema: dict[str, Any]) -> bool:
    """A schema any value (or any object) satisfies: ``{}``, ``{"type": "object"}`` or
    ``{"type": "object", "additionalProperties": {}}``, with or without a description (an
    array is as typed as its items)."""
    if any(k in schema for k in ("$ref", "anyOf", "oneOf", "allOf", "enum")):
        return False
    kind = schema.get("type")
    if kind is None:
        return True
    if kind == "object":
        return not schema.get("properties") and schema.get("additionalProperties", True) in (
            True,
            {},
        )
    return False


def untyped(schema: dict[str, Any] | None, where: str, seen: set[str]) -> Iterator[str]:
    """Where ``schema`` (at ``where``) leaves a value untyped, components by name
    (``Component.field``, ``{}`` a map's values, ``[]`` a list's items), each component once.
    A missing schema is untyped."""
    if schema is None:
        yield where
        return
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            yield from untyped(document()["components"]["schemas"][name], name, seen)
        return
    if is_free_form(schema):
        if where not in FREE_FORM:
            yield where
        return
    for key in ("anyOf", "oneOf", "allOf"):
        for part in schema.get(key, ()):
            yield from untyped(part, where, seen)
    for name, field in schema.get("properties", {}).items():
        yield from untyped(field, f"{where}.{name}", seen)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from untyped(schema["additionalProperties"], f"{where}{{}}", seen)
    if schema.get("type") == "array":
        yield from untyped(schema.get("items"), f"{where}[]", seen)


def answers(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Every operation's answers, 2xx and ``default``: ("GET /api/x/ 200", its JSON schema or
    None when it declares none)."""
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            if method == "parameters":
                continue
            for status, response in operation.get("responses", {}).items():
                if not (status.startswith("2") or status == "default"):
                    continue
                content = response.get("content", {})
                media = next((t for t in content if "json" in t), None)
                schema = content[media].get("schema") if media else None
                yield f"{method.upper()} {path} {status}", schema


@functools.cache
def loaded() -> Any:
    """The schema as schemathesis reads it."""
    import schemathesis

    return schemathesis.openapi.from_dict(document())


def check_answer(method: str, path: str, response: Any) -> None:
    """Fail unless a JSON answer of the Django test client matches the schema of its operation
    and status (``default``: the error shape); an answer of no operation is not checked."""
    import requests
    from schemathesis.core.transport import Response

    if "json" not in response.get("Content-Type", ""):
        return
    operation = loaded().find_operation_by_path(method, path)
    if operation is None:
        return
    headers = {name.lower(): [value] for name, value in response.items()}
    request = requests.Request(method, f"http://testserver{path}").prepare()
    operation.validate_response(
        Response(response.status_code, headers, response.content, request, 0.0, True)
    )
