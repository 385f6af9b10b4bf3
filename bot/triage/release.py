"""Which class a release the tree does not list loads, when its family's naming says so.

A user names a minor release (`internlm2_5-7b-chat`, `Jamba-Mini-1.7`) whose checkpoint the
tree's examples do not list, but other releases of the same major version are listed. Such a
release loads the family's class when that class is named by the major version alone
(`InternLM2ForCausalLM`) or by no version (`JambaForCausalLM`), and the tree has no class of that
family named after a minor release (`Exaone4_5_...`, `Step3p5...`): a family that gives minor
releases classes of their own may have given one to this release too, so it is asked about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_MINOR_VERSION = re.compile(r"^[a-z]*?(\d+)\.\d+$")  # `2.5` -> 2, `v2.5` -> 2, `internlm2.5` -> 2
_CLASS_SUFFIX = re.compile(r"(?:For[A-Z]\w*|LMHeadModel|Model)$")
_DIGITS = re.compile(r"\d+")
# What follows a family's name in the class of one of its minor releases: `4_5`, `3p5`, `2_5_`.
_RELEASE_AFTER_MAJOR = re.compile(r"^[_p]?\d")
_RELEASE_AFTER_NAME = re.compile(r"^_?\d+[_p]\d")


def written_major(family: str) -> str | None:
    """The major version of the first minor version the family name carries (``internlm2.5``
    -> ``2``, ``ai21-jamba-mini-1.7`` -> ``1``), or None when it carries none."""
    for token in family.split("-"):
        match = _MINOR_VERSION.match(token)
        if match:
            return str(int(match.group(1)))
    return None


def loads_family_class(family: str, archs: Iterable[str], known: Iterable[str]) -> bool:
    """True when the release ``family`` names (a family name with a minor version, as
    ``bot.triage.names.family_name`` gives it) loads each of ``archs``, classes the tree lists for
    other releases of the same major version; ``known``: every architecture of the tree."""
    major = written_major(family)
    archs = list(archs)
    if major is None or not archs:
        return False
    heads = [_head(arch) for arch in known]
    return all(_named_for_major(arch, major, heads) for arch in archs)


def class_family(arch: str) -> str:
    """A class's family: its name before ``For...`` / ``Model`` (``Gemma3ForCausalLM`` and
    ``Gemma3ForConditionalGeneration`` are both ``gemma3``)."""
    return _CLASS_SUFFIX.sub("", arch).lower()


_head = class_family


def _named_for_major(arch: str, major: str, heads: list[str]) -> bool:
    head = _head(arch)
    digits = [str(int(d)) for d in _DIGITS.findall(head)]
    if digits == [major]:
        found = _DIGITS.search(head)
        stem = head[: found.end()] if found else head
        after = _RELEASE_AFTER_MAJOR
    elif not digits:
        stem, after = head, _RELEASE_AFTER_NAME
    else:  # `Qwen3_5`, `Step3p5`, `Glm5`: named after another version than the one written
        return False
    return not any(h.startswith(stem) and after.match(h[len(stem) :]) for h in heads)
