"""Output schemas: a JSON schema checked before it is used, and an output checked against it.

Below everything else in the core: it imports nothing of owrl, so the models that carry a
schema (:mod:`owrl_sdk.rules.inputs`) check it when they are built, and the ``outputs`` plugin
checks a ``done`` against it. ``jsonschema`` is imported when a schema is first checked.

A schema comes from whoever submits a flow or a job, so checking an output against it is
untrusted work: a schema whose ``$ref``s fan out (each level naming the next twice) multiplies
the work by two per level, and a ``pattern`` such as ``^(a|a)+$`` backtracks for a time that
doubles with each character. Two limits hold it: :func:`check_schema` refuses a schema that
expands past :data:`MAX_EXPANSION` parts through its references, and
:func:`check_output_boxed` checks an output in a child process of its own, killed after
:data:`BOX_SECONDS` and held to :data:`BOX_MEMORY_MB` of memory, while the caller's event loop
goes on (Python's regular expressions hold the interpreter while they run, so a thread would
not do).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Optional

#: Parts a schema may expand to through its references (a recursive reference counts once).
MAX_EXPANSION = 20_000
#: Seconds and megabytes an output check may take in its child process.
BOX_SECONDS = 5.0
BOX_MEMORY_MB = 1024

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
    if expansion(schema) > MAX_EXPANSION:
        raise ValueError(f"the schema expands to more than {MAX_EXPANSION:,} parts through its references "
                         "($ref naming parts that name others, again and again): checking an output against it "
                         "would take too long")
    return schema


def _pointer(schema: Any, ref: str) -> Any:
    """The part of ``schema`` a local reference (``#/$defs/a``) names, or None."""
    if ref == "#":
        return schema
    if not ref.startswith("#/"):
        return None  # an anchor (#name): not followed, counted as one part
    node = schema
    for raw in ref[2:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            return None
    return node


def expansion(schema: Any, cap: int = MAX_EXPANSION) -> int:
    """How many parts ``schema`` amounts to with every local reference followed, stopping past
    ``cap``. A reference back to a part being expanded (a recursive schema) counts once: its
    work is bounded by the output, not by the schema."""
    sizes: dict[int, int] = {}

    def size(node: Any, open_: frozenset[int]) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_:
            return 1
        inner = open_ | {id(node)}
        total = 1
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _REF_KEYS and isinstance(value, str) and value.startswith("#"):
                    target = _pointer(schema, value)
                    total += size(target, inner) if target is not None else 1
                else:
                    total += size(value, inner)
                if total > cap:
                    break
        elif isinstance(node, list):
            for value in node:
                total += size(value, inner)
                if total > cap:
                    break
        sizes[id(node)] = total
        return total

    return size(schema, frozenset())


def _cut(message: str, most: int = 300) -> str:
    """A validator's message, which quotes the output's value, cut to ``most`` characters."""
    return message if len(message) <= most else message[: most // 2] + " ... " + message[-most // 3:]


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
    parts = [f"{_path(e.absolute_path) or '(the output)'}: {_cut(e.message)}" for e in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "the output does not match the output_schema: " + "; ".join(parts)


#: The child process of :func:`check_output_boxed`: limits first, then this module, loaded from
#: its file (not through the package: nothing else of owrl is imported there).
_CHILD = """
import importlib.util, json, sys
seconds, megabytes, path = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
try:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))
    resource.setrlimit(resource.RLIMIT_CPU, (int(seconds) + 1, int(seconds) + 1))
except (ImportError, ValueError, OSError):
    pass
spec = importlib.util.spec_from_file_location("owrl_outputschema_box", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
job = json.load(sys.stdin)
print(json.dumps({"problem": module.check_output(job["schema"], job["output"], job["limit"])}))
"""


async def check_output_boxed(schema: dict[str, Any], output: Any, limit: int = 3,
                             seconds: float = BOX_SECONDS, megabytes: int = BOX_MEMORY_MB) -> Optional[str]:
    """:func:`check_output` in a child process held to ``seconds`` and ``megabytes``: the
    caller's event loop is free meanwhile. A check that passes a limit is a problem the
    caller reports like a mismatch (the schema, not the output, is at fault)."""
    payload = json.dumps({"schema": schema, "output": output, "limit": limit}).encode()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, str(seconds), str(megabytes), __file__,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(payload), timeout=seconds + 2)
    except asyncio.TimeoutError:
        try:
            proc.kill()
        except ProcessLookupError:  # it ended that moment (its own CPU limit, on a busy machine)
            pass
        await proc.wait()
        return (f"the output could not be checked against the output_schema within {seconds:g} s "
                "(a pattern or the schema's size makes the check too costly)")
    if proc.returncode != 0:
        said = err.decode(errors="replace").strip().splitlines()
        why = said[-1][:200] if said else f"exit status {proc.returncode}"
        return (f"the output could not be checked against the output_schema within the check's limits "
                f"({seconds:g} s, {megabytes} MB): {why}")
    problem = json.loads(out.decode().strip().splitlines()[-1])["problem"]
    return None if problem is None else str(problem)
