"""Issue 27, item 4: every answer of the API is typed in its OpenAPI schema, so that the schema
fuzzing (``test_schema_fuzz``) and every API test (``conftest._answers_match_the_schema``)
check what the endpoints return."""

import pytest

from tests.console.api_schema import FREE_FORM, answers, document, untyped


def test_every_answer_of_every_operation_is_typed():
    """No 2xx answer (nor the error answer) is a free-form object or lacks a schema; inside
    them, only the values named in ``FREE_FORM`` are open."""
    doc = document()
    seen: set[str] = set()
    found = {where: list(untyped(schema, where, seen)) for where, schema in answers(doc)}
    assert len(found) >= 40  # every operation, each with its answers (not an empty walk)
    assert {where: gaps for where, gaps in found.items() if gaps} == {}
    # Every allowed open value still exists: a stale entry would allow a new one unnoticed.
    named = {name.split(".")[0] for name in FREE_FORM}
    assert named <= seen


@pytest.mark.parametrize(
    ("schema", "gap"),
    [
        ({"type": "object", "additionalProperties": {}}, "GET /x 200"),
        ({"type": "object"}, "GET /x 200"),
        (None, "GET /x 200"),
        ({"description": "anything"}, "GET /x 200"),
        (
            {"type": "object", "properties": {"rows": {"type": "array", "items": {}}}},
            "GET /x 200.rows[]",
        ),
        (
            {"type": "object", "additionalProperties": {"type": "object"}},
            "GET /x 200{}",
        ),
    ],
)
def test_the_walk_finds_an_untyped_answer(schema, gap):
    """The check above can fail: an answer declared ``responses=dict`` (drf-spectacular's
    ``{"type": "object", "additionalProperties": {}}``), none, or an open value inside one."""
    content = {} if schema is None else {"application/json": {"schema": schema}}
    doc = {"paths": {"/x": {"get": {"responses": {"200": {"content": content}}}}}}
    (where, found), *_ = answers(doc)
    assert list(untyped(found, where, set())) == [gap]


def test_typed_answers_pass_the_walk():
    typed = {
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": {"type": "integer"}},
            "by": {"type": "object", "additionalProperties": {"type": "number"}},
        },
    }
    assert list(untyped(typed, "GET /x 200", set())) == []
