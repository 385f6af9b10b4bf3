"""The PR write-up: Jinja templates in templates/, composed to the upstream's own PR template.

The templates ship inside the installed package as ``bot._templates`` (pyproject.toml maps the
top-level templates/ there) and are read with importlib.resources, so a plain
``pip install`` renders exactly what a checkout does.

Templates are files; data is only ever passed as values (never compiled as template code), and
every value goes through a filter that neutralises Markdown/HTML where it is shown.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

import jinja2

from bot.github import identity

TEMPLATES_PACKAGE = "bot._templates"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def code_plain(value: object) -> str:
    """One line of text without control or format characters (bidi overrides among them)."""
    return _plain(value)


def _plain(value: object) -> str:
    text = "".join(ch for ch in str(value) if unicodedata.category(ch) not in ("Cf", "Cc"))
    return _CONTROL.sub(" ", text).strip()


def code(value: object) -> str:
    """An inline code span that stays one span whatever the value holds."""
    text = _plain(value)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_inner(value: object) -> str:
    return _plain(value).replace("`", "'")


def shell_quoted_inner(value: object) -> str:
    return _plain(value).replace("'", "")


def _template_source(name: str) -> str | None:
    """A template's text from the installed package; None (jinja2: not found) if absent. A fix
    class's own templates, ``recipes/<package>/<file>``, are in its package's templates/
    directory (:func:`bot.recipes.base.own_templates`); the generic ones in bot._templates."""
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    if parts[0] == "recipes" and len(parts) > 2:
        if not parts[1].isidentifier():
            return None
        try:
            resource = files(f"bot.recipes.{parts[1]}").joinpath("templates", *parts[2:])
        except ModuleNotFoundError:
            return None
    else:
        resource = files(TEMPLATES_PACKAGE).joinpath(*parts)
    return resource.read_text(encoding="utf-8") if resource.is_file() else None


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_template_source),
        autoescape=False,  # the output is Markdown; values are escaped by the filters below
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        code=code,
        code_plain=_plain,
        code_inner=code_inner,
        shell_quoted_inner=shell_quoted_inner,
    )
    return env


# The slots of the PR templates a recipe fills with its own section templates.
RECIPE_SECTIONS = ("summary", "claims", "root_cause")


def render_pr(
    title: str,
    context: Mapping[str, Any],
    sections: Mapping[str, str],
    style: str,
    blocks: Mapping[tuple[str, str], str],
) -> str:
    """``pr.md``: the title line, then the upstream-shaped body with the recipe's sections and
    the generic blocks (:func:`bot.publish.contribution.render_blocks`: validation,
    contribution, checklist, each in its markers)."""
    from bot.publish.contribution import CHECKLIST, CLAIMS, CONTRIBUTION, RESULTS

    missing = [slot for slot in RECIPE_SECTIONS if slot not in sections]
    if missing:
        raise ValueError(f"the recipe's write-up has no {', '.join(missing)} section")
    env = environment()
    markers = {
        "identity": identity.identity_markers(
            context["fingerprint"], context.get("member_fingerprints", ())
        ),
    }
    values = {
        **context,
        "sections": dict(sections),
        "markers": markers,
        "results_block": blocks[RESULTS],
        "contribution_block": blocks[CONTRIBUTION],
        "checklist_block": blocks[CHECKLIST],
        "claims_block": blocks[CLAIMS],
    }
    body = env.get_template(f"pr_{style}.md.j2").render(values)
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"  # empty optional sections
    return f"{_plain(title)}\n\n{body}"


GROUP_SECTIONS = ("row", "group_claims", "group_root_cause")


def render_row(context: Mapping[str, Any], sections: Mapping[str, str]) -> str:
    """A group member's cells in the group's table (one line: where, evidence)."""
    text = environment().get_template(sections["row"]).render(dict(context))
    return " ".join(text.split())


def render_group_parts(
    members: list[dict[str, Any]], sections: Mapping[str, str]
) -> dict[str, str]:
    """One recipe's claims and root cause for the members of a group it planned, once."""
    env = environment()
    values = {"members": members}
    return {
        "claims": env.get_template(sections["group_claims"]).render(values).strip(),
        "root_cause": env.get_template(sections["group_root_cause"]).render(values).strip(),
    }


def render_sections(context: Mapping[str, Any], sections: Mapping[str, str]) -> dict[str, str]:
    """Each of a recipe's section templates rendered alone (a group's body lists each member's)."""
    env = environment()
    return {
        slot: env.get_template(sections[slot]).render(dict(context)).strip()
        for slot in RECIPE_SECTIONS
    }
