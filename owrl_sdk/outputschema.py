"""Output schemas: a JSON schema checked before it is used, and an output checked against it.

Below everything else in the core: it imports nothing of owrl, so the models that carry a
schema (:mod:`owrl_sdk.inputs`) check it when they are built, and the ``outputs`` plugin
checks a ``done`` against it. ``jsonschema`` is imported when a schema is first checked.
"""

from __future__ import annotations

from typing import Any, Optional

#: Keywords whose value is a reference to another schema.
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def _outside_refs(node: Any, where: str = "") -> list[tuple[str, str]]:
    """The references in a schema that point outside it (anything but ``#...``), with where."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{where}.{key}" if where else str(key)
            if key in _REF_KEYS and isinstance(value, str) and not value.startswith("#"):
                found.append((here, value))
            else:
                found.extend(_outside_refs(value, here))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(_outside_refs(value, f"{where}[{i}]"))
    return found


def _registry() -> Any:
    """An empty reference registry that retrieves nothing: a schema resolves only references
    inside itself. (Without one, jsonschema's legacy resolver fetches http and file URLs from
    this process, past the domain allowlist and the server's refusal of local files.)"""
    from referencing import Registry

    return Registry()


def check_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` if it is a valid JSON schema whose references stay inside it; else
    ValueError saying what is wrong with it."""
    import jsonschema  # type: ignore[import-untyped]

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as err:
        where = _path(err.absolute_path)
        raise ValueError(f"not a valid JSON schema: {err.message}" + (f" (at {where})" if where else "")) from None
    outside = _outside_refs(schema)
    if outside:
        where, ref = outside[0]
        raise ValueError(f"the schema refers to {ref!r} (at {where}): an output schema may refer only to its own "
                         "parts ('#/...'); nothing is fetched to check an output")
    return schema


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def check_output(schema: dict[str, Any], output: Any, limit: int = 3) -> Optional[str]:
    """None when ``output`` matches ``schema``; else one line naming each path that failed
    (``orders[0].total: 'x' is not of type 'number'``), the first ``limit`` of them."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        errors = sorted(cls(schema, registry=_registry()).iter_errors(output),
                        key=lambda e: (list(map(str, e.absolute_path)), e.message))
    except Exception as err:  # a reference that cannot be resolved without fetching it
        from referencing.exceptions import Unresolvable

        if isinstance(err, Unresolvable) or isinstance(getattr(err, "__cause__", None), Unresolvable) \
                or type(err).__name__ == "_WrappedReferencingError":
            return f"the output_schema refers to something outside it, which is not fetched: {err}"[:1000]
        raise
    if not errors:
        return None
    parts = [f"{_path(e.absolute_path) or '(the output)'}: {e.message}" for e in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "the output does not match the output_schema: " + "; ".join(parts)
