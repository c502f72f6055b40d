"""The schema package's internal API for other tubeless packages (the seam).

Who may use it: `tubeless.trace`, which checks every record against the trace schema
with the compiled closures. Other packages use the public `tubeless.schema`;
applications should not import this module: it is not part of the public API and may
change in any release.

What it promises, for as long as a name is listed here:

- `compile_checker(document, pointer="")` compiles the subschema at `pointer` of a JSON
  Schema document (`$ref`s resolve inside it, nothing is retrieved) into a
  `SchemaChecker`: a fast `is_valid(value)` and a precise `first_error(value)`, whose
  message never quotes the rejected value. It raises `SchemaDefinitionError` for a
  pointer or `$ref` that points nowhere, or a bad `pattern`.
"""

from tubeless.schema._compiled import SchemaChecker, compile_checker

__all__ = [
    "SchemaChecker",
    "compile_checker",
]
