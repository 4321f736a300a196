"""The settings as a table: `signoff serve --help` prints it, README's table mirrors it."""

from __future__ import annotations

import textwrap
from collections.abc import Collection

from pydantic_settings import BaseSettings

__all__ = ["env_name", "help_text", "rows"]


def env_name(model: type[BaseSettings], field: str) -> str:
    alias = model.model_fields[field].validation_alias
    assert isinstance(alias, str), f"every setting has a string alias; {field} does not"
    return alias


def _default_text(env: str, default: object, required: Collection[str]) -> str:
    if env in required:
        return "required"
    if default is None:
        return "unset"
    if isinstance(default, float):
        return f"{default:g}"
    return str(default)


def rows(model: type[BaseSettings], required: Collection[str]) -> list[tuple[str, str, str]]:
    """(variable, default, description) for every field of ``model``, in declaration order."""
    out = []
    for name, info in model.model_fields.items():
        env = env_name(model, name)
        out.append((env, _default_text(env, info.default, required), info.description or ""))
    return out


def help_text(table: list[tuple[str, str, str]], width: int = 100) -> str:
    """A plain-text table with the columns laid out and descriptions wrapped to ``width``.

    Print it with a raw formatter (argparse's `RawDescriptionHelpFormatter`).
    """
    lines_in = [("VARIABLE", "DEFAULT", "MEANING"), *table]
    env_w = max(len(row[0]) for row in lines_in)
    default_w = max(len(row[1]) for row in lines_in)
    desc_w = max(30, width - env_w - default_w - 4)
    lines = []
    for env, default, description in lines_in:
        wrapped = textwrap.wrap(description, desc_w) or [""]
        lines.append(f"{env:<{env_w}}  {default:<{default_w}}  {wrapped[0]}".rstrip())
        pad = " " * (env_w + default_w + 4)
        lines.extend(pad + more for more in wrapped[1:])
    return "\n".join(lines)
