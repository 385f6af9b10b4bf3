"""Codemod: a path added to one CI step's ``source_file_dependencies`` in a Buildkite YAML file.

``tests/AGENTS.md``: check that the step's ``source_file_dependencies`` cover the changed
files; "update the step if not". The file is edited as text (a YAML round trip would rewrite
its comments and quoting): the new item goes after the last item of the step's list, with the
same indentation and dash, and the file must parse to the same data plus that one path.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from bot.codemods.base import Case, CodemodRefused, shown

_SAFE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")
_DEPENDENCIES = "source_file_dependencies:"


def add_step_dependency(source: str, *, step_key: str, path: str) -> str:
    """``source`` with ``path`` in the dependencies of the top-level step whose key is
    ``step_key`` (not its mirrors'); unchanged if the step already lists it."""
    if not _SAFE_PATH.match(path) or ".." in path.split("/"):
        raise CodemodRefused(f"not a repository path: {shown(path)}")
    before = _load(source)
    step = _step(before, step_key)
    deps = step.get("source_file_dependencies")
    if not isinstance(deps, list):
        raise CodemodRefused(f"step {shown(step_key)} has no source_file_dependencies list")
    if path in deps:
        return source
    lines = source.splitlines(keepends=True)
    start = _step_line(lines, step_key)
    insert_at, item_prefix = _after_last_item(lines, start)
    newline = "\n" if not lines[insert_at - 1].endswith("\r\n") else "\r\n"
    if not lines[insert_at - 1].endswith(("\n", "\r\n")):
        lines[insert_at - 1] += newline
    lines.insert(insert_at, f"{item_prefix}{path}{newline}")
    after = "".join(lines)
    expected = _load(source)
    _step(expected, step_key)["source_file_dependencies"].append(path)
    if _load(after) != expected:
        raise CodemodRefused(f"adding {path} to step {step_key} changes more than its list")
    return after


def _load(source: str) -> Any:
    try:
        data = yaml.safe_load(source)
    except yaml.YAMLError:
        raise CodemodRefused("the CI file is not YAML") from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise CodemodRefused("the CI file has no steps list")
    return data


def _step(data: dict[str, Any], key: str) -> dict[str, Any]:
    found = [s for s in data["steps"] if isinstance(s, dict) and s.get("key") == key]
    if len(found) != 1:
        raise CodemodRefused(f"{len(found)} steps have the key {shown(key)}")
    return found[0]


def _step_line(lines: list[str], key: str) -> int:
    """The line of the step's ``key:``."""
    pattern = re.compile(rf"^\s*(?:-\s+)?key:\s*['\"]?{re.escape(key)}['\"]?\s*(?:#.*)?$")
    found = [i for i, line in enumerate(lines) if pattern.match(line.rstrip("\r\n"))]
    if len(found) != 1:
        raise CodemodRefused(f"the step key {shown(key)} is not on exactly one line")
    return found[0]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _after_last_item(lines: list[str], key_line: int) -> tuple[int, str]:
    """Where the new item goes (after the step's list's last item) and its prefix."""
    step_indent = _indent(lines[key_line].replace("- ", "  ", 1))
    for index in range(key_line + 1, len(lines)):
        stripped = lines[index].strip()
        if stripped and _indent(lines[index]) < step_indent:
            break
        if lines[index].rstrip("\r\n").strip() == _DEPENDENCIES and (
            _indent(lines[index]) == step_indent
        ):
            items: list[int] = []
            for item in range(index + 1, len(lines)):
                text = lines[item].strip()
                if not text or text.startswith("#"):
                    continue
                if text.startswith("- ") and _indent(lines[item]) >= step_indent:
                    items.append(item)
                    continue
                break
            if not items:
                raise CodemodRefused("the step's source_file_dependencies list is empty")
            last = lines[items[-1]]
            prefix = last[: _indent(last)] + "- "
            return items[-1] + 1, prefix
    raise CodemodRefused("the step's source_file_dependencies are not a block list")


# A test area as the release's spec_decode.yaml lays it out (the recipes' cases use it too).
SPEC_DECODE_AREA = """\
group: Spec Decode
steps:
- label: "V1 Spec Decode"
  key: v1-spec-decode
  source_file_dependencies:
    - vllm/model_executor/
    - tests/v1/spec_decode
  commands:
    - pytest -v -s -m 'not slow_test' v1/spec_decode
  mirror:
    amd:
      label: "AMD V1 Spec Decode"
      source_file_dependencies:
      - vllm/platforms/rocm.py

- label: "Other"
  key: other
  source_file_dependencies:
  - vllm/other/
  commands:
  - pytest -v -s other
"""

CASES: list[Case] = [
    Case(
        "the path goes after the step's last dependency, same indentation",
        lambda s: add_step_dependency(
            s, step_key="v1-spec-decode", path="vllm/models/kimi_k3/amd/linear.py"
        ),
        SPEC_DECODE_AREA,
        SPEC_DECODE_AREA.replace(
            "    - tests/v1/spec_decode\n",
            "    - tests/v1/spec_decode\n    - vllm/models/kimi_k3/amd/linear.py\n",
        ),
    ),
    Case(
        "a step whose items are not indented under the key",
        lambda s: add_step_dependency(s, step_key="other", path="vllm/models/flint/model.py"),
        SPEC_DECODE_AREA,
        SPEC_DECODE_AREA.replace(
            "  - vllm/other/\n", "  - vllm/other/\n  - vllm/models/flint/model.py\n"
        ),
    ),
    Case(
        "already listed: no change",
        lambda s: add_step_dependency(s, step_key="v1-spec-decode", path="vllm/model_executor/"),
        SPEC_DECODE_AREA,
    ),
    Case(
        "no step with that key: refused",
        lambda s: add_step_dependency(s, step_key="missing", path="vllm/x.py"),
        SPEC_DECODE_AREA,
        refuses="0 steps have the key",
    ),
    Case(
        "a path with a shell metacharacter: refused",
        lambda s: add_step_dependency(s, step_key="other", path="vllm/$(id).py"),
        SPEC_DECODE_AREA,
        refuses="not a repository path",
    ),
]
