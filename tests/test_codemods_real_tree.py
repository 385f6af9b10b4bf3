"""The codemods on real vLLM trees: 0.23.0 edited must match what upstream wrote in 0.24.0."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.codemods import (
    CodemodRefused,
    RegressionTestEdit,
    add_eagle3_regression_test,
    add_import_name,
    append_base_class,
    insert_registry_entry,
    unified_diff,
)
from bot.codemods.safety import (
    changed_lines_confined,
    check_round_trip,
    check_ruff_clean,
    class_header_span,
    format_touched,
    import_region_span,
    ruff_binary,
    top_level_span,
)
from bot.tree.fetch import release_tree

pytestmark = pytest.mark.vllm_tree

QWEN3_NEXT = "vllm/model_executor/models/qwen3_next.py"
REGISTRY = "tests/models/registry.py"
SEED_ENTRY = """\
    "DFlashQwen3NextDraftModel": _HfExamplesInfo(
        "Qwen/Qwen3-Coder-Next",
        speculative_model="z-lab/Qwen3-Coder-Next-DFlash",
        use_original_num_layers=True,
        max_model_len=8192,
        max_num_seqs=32,
        min_transformers_version="4.56.3",
    ),
"""


def _copy(version: str, relpaths: list[str], dest: Path) -> Path:
    """A scratch tree with the tree's ruff settings and the files we edit; the cache stays
    untouched."""
    source = release_tree(version)
    for relpath in ["pyproject.toml", *relpaths]:
        target = dest / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relpath, target)
    return dest


def _interfaces_import(source: str) -> str:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == "interfaces":
            return ast.get_source_segment(source, node) or ""
    raise AssertionError("no from .interfaces import")


def _class_header(source: str, name: str) -> str:
    start, end = class_header_span(source, name)
    return "".join(source.splitlines(keepends=True)[start - 1 : end])


def _fix_qwen3_next(source: str) -> str:
    source = add_import_name(source, ".interfaces", "SupportsEagle3")
    return append_base_class(source, "Qwen3NextForCausalLM", "SupportsEagle3")


def test_qwen3_next_fix_matches_upstream(tmp_path: Path) -> None:
    root = _copy("0.23.0", [QWEN3_NEXT], tmp_path)
    before = (root / QWEN3_NEXT).read_text()
    upstream = (release_tree("0.24.0") / QWEN3_NEXT).read_text()
    check_round_trip(before, QWEN3_NEXT)

    after = _fix_qwen3_next(before)

    assert _interfaces_import(after) == _interfaces_import(upstream)
    assert _class_header(after, "Qwen3NextForCausalLM") == _class_header(
        upstream, "Qwen3NextForCausalLM"
    )
    assert _fix_qwen3_next(after) == after
    changed_lines_confined(
        before,
        after,
        [import_region_span(before), class_header_span(before, "Qwen3NextForCausalLM")],
    )
    check_ruff_clean(before, after, root, QWEN3_NEXT)
    assert format_touched(before, after, root, QWEN3_NEXT) == after
    assert len(after.splitlines()) == len(before.splitlines()) + 2


def test_qwen3_next_diff_applies_with_git(tmp_path: Path) -> None:
    root = _copy("0.23.0", [QWEN3_NEXT], tmp_path)
    before = (root / QWEN3_NEXT).read_text()
    after = _fix_qwen3_next(before)
    patch = tmp_path / "patch.diff"
    patch.write_text(unified_diff(QWEN3_NEXT, before, after))
    git = ["git", "-c", "core.autocrlf=false"]
    subprocess.run([*git, "init", "-q", str(root)], check=True)
    subprocess.run([*git, "-C", str(root), "apply", str(patch)], check=True)
    assert (root / QWEN3_NEXT).read_text() == after


def _entry_call(source: str, key: str) -> ast.Call:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for k, value in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == key:
                    assert isinstance(value, ast.Call)
                    return value
    raise AssertionError(f"no entry {key}")


def _spec_decoding_keys(source: str) -> list[object]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_SPECULATIVE_DECODING_EXAMPLE_MODELS"
            for t in node.targets
        ):
            assert isinstance(node.value, ast.Dict)
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    raise AssertionError("no _SPECULATIVE_DECODING_EXAMPLE_MODELS")


def _add_seed_entry(source: str) -> str:
    return insert_registry_entry(
        source,
        dict_name="_SPECULATIVE_DECODING_EXAMPLE_MODELS",
        key="DFlashQwen3NextDraftModel",
        args=["Qwen/Qwen3-Coder-Next"],
        kwargs=[
            ("speculative_model", "z-lab/Qwen3-Coder-Next-DFlash"),
            ("use_original_num_layers", True),
            ("max_model_len", 8192),
            ("max_num_seqs", 32),
            ("min_transformers_version", "4.56.3"),
        ],
        section="DFlash",
    )


def test_registry_entry_matches_upstream(tmp_path: Path) -> None:
    root = _copy("0.23.0", [REGISTRY], tmp_path)
    before = (root / REGISTRY).read_text()
    upstream = (release_tree("0.24.0") / REGISTRY).read_text()
    check_round_trip(before, REGISTRY)

    after = _add_seed_entry(before)

    ours = _entry_call(after, "DFlashQwen3NextDraftModel")
    theirs = _entry_call(upstream, "DFlashQwen3NextDraftModel")
    assert ast.dump(ours) == ast.dump(theirs)
    keys = _spec_decoding_keys(after)
    assert keys[keys.index("DFlashDraftModel") + 1] == "DFlashQwen3NextDraftModel"
    assert SEED_ENTRY + "    # [Eagle]\n" in after
    assert _add_seed_entry(after) == after
    changed_lines_confined(
        before, after, [top_level_span(before, "_SPECULATIVE_DECODING_EXAMPLE_MODELS")]
    )
    check_ruff_clean(before, after, root, REGISTRY)


def _lint(root: Path, relpath: str, source: str) -> list[str]:
    """ruff's isort and pyflakes findings under the tree's own settings."""
    result = subprocess.run(
        [ruff_binary(), "check", "--no-cache", "--select", "I,F", "--output-format", "concise"]
        + ["--stdin-filename", relpath],
        cwd=root,
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in result.stdout.splitlines() if relpath in line]


_REGISTRY_TEST_INPUTS = [
    "tests/models/test_registry.py",
    "vllm/model_executor/models/interfaces.py",
    "vllm/model_executor/models/registry.py",
    QWEN3_NEXT,
]


def _plan_qwen3_next_test(root: Path) -> RegressionTestEdit:
    return add_eagle3_regression_test(
        root,
        class_name="Qwen3NextForCausalLM",
        class_module="vllm.model_executor.models.qwen3_next",
        archs=["Qwen3NextForCausalLM"],
    )


@pytest.mark.parametrize("version", ["0.23.0", "0.34.0"])
def test_registry_regression_test_is_valid_in_the_release(tmp_path: Path, version: str) -> None:
    root = _copy(version, _REGISTRY_TEST_INPUTS, tmp_path)
    edit = _plan_qwen3_next_test(root)

    assert edit.path == "tests/models/test_registry.py"
    assert edit.node_ids == [
        "tests/models/test_registry.py::test_registry_supports_eagle3[Qwen3NextForCausalLM]"
    ]
    assert (root / edit.path).read_text() == edit.before  # planning never writes
    assert _lint(root, edit.path, edit.after) == _lint(root, edit.path, edit.before)
    check_ruff_clean(edit.before, edit.after, root, edit.path)
    new_test = next(
        node
        for node in ast.parse(edit.after).body
        if isinstance(node, ast.FunctionDef) and node.name == "test_registry_supports_eagle3"
    )
    assert ast.unparse(new_test.decorator_list[0]) == (
        "pytest.mark.parametrize('model_arch', ['Qwen3NextForCausalLM'])"
    )

    (root / edit.path).write_text(edit.after)
    assert _plan_qwen3_next_test(root).after == edit.after


def test_package_test_file_is_extended_on_0_34_0(tmp_path: Path) -> None:
    package_test = "tests/models/kimi_k3/test_eagle3.py"
    model = "vllm/models/kimi_k3/nvidia/model.py"
    root = _copy(
        "0.34.0", [package_test, model, "vllm/model_executor/models/interfaces.py"], tmp_path
    )

    already = add_eagle3_regression_test(
        root,
        class_name="KimiLinearForCausalLM",
        class_module="vllm.models.kimi_k3.nvidia.model",
        archs=["KimiLinearForCausalLM"],
    )
    assert already.after == already.before
    assert already.node_ids == [f"{package_test}::test_kimi_linear_advertises_eagle3_support"]

    edit = add_eagle3_regression_test(
        root,
        class_name="KimiLinearModel",
        class_module="vllm.models.kimi_k3.nvidia.model",
        archs=[],
    )
    assert edit.path == package_test
    assert edit.node_ids == [f"{package_test}::test_kimi_linear_model_advertises_eagle3_support"]
    assert _lint(root, edit.path, edit.after) == _lint(root, edit.path, edit.before)
    check_ruff_clean(edit.before, edit.after, root, edit.path)
    assert "    assert supports_eagle3(KimiLinearModel)\n" in edit.after


def test_regression_test_refuses_a_class_the_module_lacks(tmp_path: Path) -> None:
    root = _copy("0.23.0", _REGISTRY_TEST_INPUTS, tmp_path)
    with pytest.raises(CodemodRefused, match="does not define NoSuchModel"):
        add_eagle3_regression_test(
            root,
            class_name="NoSuchModel",
            class_module="vllm.model_executor.models.qwen3_next",
            archs=["Qwen3NextForCausalLM"],
        )
