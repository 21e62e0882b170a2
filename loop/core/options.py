"""A backend's own compile keys, declared by its compiler as a pydantic model.

Here, below both rooms, because a compiler declares its keys (``Compiler.options_model``) and
the sweep file's schema (``loop.author.schema``) adds them to ``compile:``, and neither may import
the other for it. The keys travel to the compiler in ``CompileOptions.backend_options``; the
compiler reads them back typed with :meth:`BackendOptions.of`.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from loop.core.vocab import CompileOptions

T = TypeVar("T", bound="BackendOptions")


class BackendOptions(BaseModel):
    """The base of a backend's options model. Each field is one ``compile:`` key, its description
    the README's (the schema prefixes the backend's name); every field has a default (None:
    the backend's own choice), since a sweep file may set none of them."""

    # As the sweep file's schema validates: no coercion, no unknown keys, no NaN or infinity.
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)

    @classmethod
    def of(cls: type[T], options: CompileOptions) -> T:
        """The keys of ``options`` as this model, for the compiler to read. Already checked
        against the schema when they came from a sweep file; lax here since they arrive as
        stored (a list as a tuple), and ``extra="forbid"`` still refuses another backend's keys."""
        return cls.model_validate(dict(options.backend_options), strict=False)
