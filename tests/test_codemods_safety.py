"""Safety checks, ruff-backed formatting of edited lines, isort ordering and git-ready diffs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.codemods import CodemodRefused, add_import_name, append_base_class, unified_diff
from bot.codemods.ordering import member_sort_key
from bot.codemods.safety import (
    changed_line_ranges,
    changed_lines_confined,
    check_round_trip,
    check_ruff_clean,
    format_touched,
    import_region_span,
    ruff_binary,
)


def test_round_trip_refuses_what_libcst_rewrites() -> None:
    # libcst#1457: the space in "except X :" is dropped by the libcst release we run.
    source = "try:\n    pass\nexcept ValueError :\n    pass\n"
    with pytest.raises(CodemodRefused, match="line 3"):
        check_round_trip(source, "vllm/x.py")


def test_round_trip_refuses_a_byte_order_mark() -> None:
    with pytest.raises(CodemodRefused, match="vllm/x.py: libcst does not reproduce line 1"):
        check_round_trip("\ufeffx = 1\n", "vllm/x.py")


def test_round_trip_accepts_faithful_sources_and_refuses_broken_ones() -> None:
    check_round_trip("x = 1\r\nif x:\n\ty = (1 \\\n  + 2)\n", "vllm/x.py")
    with pytest.raises(CodemodRefused, match="cannot parse line 1"):
        check_round_trip("def (:\n", "vllm/x.py")


def test_confined_accepts_edits_inside_and_next_to_allowed_lines() -> None:
    before = "a\nb\nc\nd\n"
    changed_lines_confined(before, "a\nB\nc\nd\n", [(2, 2)])
    changed_lines_confined(before, "a\nb\nnew\nc\nd\n", [(2, 2)])
    assert changed_line_ranges(before, "a\nb\nnew\nc\nd\n") == [(3, 3)]


def test_confined_refuses_edits_elsewhere() -> None:
    before = "a\nb\nc\nd\n"
    with pytest.raises(CodemodRefused, match="changes line 4"):
        changed_lines_confined(before, "a\nB\nc\nD\n", [(1, 2)])
    with pytest.raises(CodemodRefused, match="changes line 4"):
        changed_lines_confined(before, "a\nb\nc\nnew\nd\n", [(1, 2)])


def _tree(tmp_path: Path, line_length: int) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.ruff]\nline-length = {line_length}\n")
    return tmp_path


_LONG_CLASS = (
    "class Qwen3NextForCausalLMExample(nn.Module, HasInnerState, SupportsLoRA, SupportsPP):\n"
    "    x   =  1\n"
)


def test_format_touched_wraps_only_the_edited_header(tmp_path: Path) -> None:
    root = _tree(tmp_path, 100)
    after = append_base_class(_LONG_CLASS, "Qwen3NextForCausalLMExample", "SupportsEagle3")
    with pytest.raises(CodemodRefused, match="ruff format would still change edited line 1"):
        check_ruff_clean(_LONG_CLASS, after, root, "vllm/models/x.py")

    formatted = format_touched(_LONG_CLASS, after, root, "vllm/models/x.py")

    assert formatted == (
        "class Qwen3NextForCausalLMExample(\n"
        "    nn.Module, HasInnerState, SupportsLoRA, SupportsPP, SupportsEagle3\n"
        "):\n"
        "    x   =  1\n"  # untouched, so left as it was
    )
    check_ruff_clean(_LONG_CLASS, formatted, root, "vllm/models/x.py")


def test_format_touched_follows_the_trees_own_line_length(tmp_path: Path) -> None:
    root = _tree(tmp_path, 120)
    after = append_base_class(_LONG_CLASS, "Qwen3NextForCausalLMExample", "SupportsEagle3")
    assert format_touched(_LONG_CLASS, after, root, "vllm/models/x.py") == after
    check_ruff_clean(_LONG_CLASS, after, root, "vllm/models/x.py")


def test_ruff_is_not_fed_paths_outside_the_tree(tmp_path: Path) -> None:
    with pytest.raises(CodemodRefused, match="not a Python file path"):
        format_touched("x = 1\n", "x = 2\n", tmp_path, "../outside.py")


_NAMES = [
    "SupportsPP",
    "supports_eagle3",
    "MAX_LEN",
    "Eagle10",
    "SupportsEagle3",
    "A",
    "_private",
    "Eagle3",
    "HTTPServer",
    "SupportsLoRA",
    "camelCase",
    "ALL",
    "Http",
    "x2",
    "x10",
]


def _ruff_isort_findings(source: str) -> str:
    result = subprocess.run(
        [ruff_binary(), "check", "--isolated", "--no-cache", "--select", "I"]
        + ["--output-format", "concise", "--stdin-filename", "m.py"],
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout


def _block(names: list[str]) -> str:
    return "from .m import (\n" + "".join(f"    {name},\n" for name in names) + ")\n"


def test_member_order_agrees_with_ruff_isort() -> None:
    ordered = sorted(_NAMES, key=member_sort_key)
    assert "All checks passed" in _ruff_isort_findings(_block(ordered))
    assert "I001" in _ruff_isort_findings(_block(list(reversed(ordered))))


@pytest.mark.parametrize("name", _NAMES)
def test_inserted_name_lands_where_ruff_wants_it(name: str) -> None:
    ordered = sorted(_NAMES, key=member_sort_key)
    without = [other for other in ordered if other != name]
    assert add_import_name(_block(without), ".m", name) == _block(ordered)


def _git_apply(tmp_path: Path, files: dict[str, str], patch: str) -> None:
    for relpath, text in files.items():
        (tmp_path / relpath).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relpath).write_bytes(text.encode())
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "change.diff").write_text(patch)
    subprocess.run(["git", "-C", str(tmp_path), "apply", "change.diff"], check=True)


def test_unified_diff_applies_with_git_even_without_final_newline(tmp_path: Path) -> None:
    before = "class A(B):\n    x = 1"
    after = append_base_class(before, "A", "SupportsEagle3")
    patch = unified_diff("pkg/a.py", before, after)
    assert patch.startswith("diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py\n")
    _git_apply(tmp_path, {"pkg/a.py": before}, patch)
    assert (tmp_path / "pkg/a.py").read_text() == after


def test_unified_diff_of_no_change_is_empty_and_paths_stay_inside() -> None:
    assert unified_diff("a.py", "x = 1\n", "x = 1\n") == ""
    with pytest.raises(CodemodRefused):
        unified_diff("../a.py", "x\n", "y\n")


def test_confined_refuses_a_change_just_before_the_allowed_lines() -> None:
    with pytest.raises(CodemodRefused, match="changes line 1"):
        changed_lines_confined("a\nb\nc\n", "A\nb\nc\n", [(2, 2)])


def test_a_file_without_imports_allows_only_its_first_line() -> None:
    assert import_region_span('"""Doc."""\nx = 1\ny = 2\n') == (1, 1)
    assert import_region_span("x = 1\nimport os\nfrom a import (\n    b,\n)\n") == (2, 5)


def test_format_touched_keeps_untouched_blank_lines_ruff_would_remove(tmp_path: Path) -> None:
    # ruff would drop two of the four blank lines after f(); they are not ours to drop.
    root = _tree(tmp_path, 100)
    before = "class A(B):\n    x = 1\n\n\ndef f():\n    pass\n\n\n\n\ny = 2\n"
    after = append_base_class(before, "A", "C")
    assert format_touched(before, after, root, "vllm/models/x.py") == after
