"""`bot propose` refuses rather than harm: each do-no-harm check, seen through propose itself.

Small synthetic vLLM trees (git repositories) where one check, and only that check, has to
stop the edit: libcst's round trip, the confinement of changed lines, the re-scan, and the
ruff formatting of touched lines. Each refusal is asserted by its own words, so losing a check
shows even when a later one would still refuse.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import git
import pytest

from bot import pipeline
from bot.errors import BotError
from tests.cli import propose_class
from tests.synthetic import READY_DECODER, make_tree

MODEL = "vllm/model_executor/models/foo.py"
PACKAGE_TEST = "tests/models/foo/test_eagle3.py"
IMPORTS = "from torch import nn\n\nfrom .interfaces import EagleModelMixin, SupportsPP\n"
TARGET = """

class FooForCausalLM({bases}):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = FooModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""
# The test file the recipe extends (it already asserts supports_eagle3 for another class).
EXISTING_TEST = (
    "from vllm.model_executor.models.interfaces import supports_eagle3\n\n\n"
    "def test_helper_exists():\n"
    "    assert supports_eagle3 is not None\n"
)
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@invalid",
}
SUPPORTS_EAGLE3_HELPER = """

def supports_eagle3(model):
    return getattr(model, "supports_eagle3", False)
"""


def foo_model(head: str = IMPORTS, bases: str = "nn.Module, SupportsPP", tail: str = "") -> str:
    return head + READY_DECODER.format(name="FooModel") + TARGET.format(bases=bases) + tail


def foo_tree(root: Path, source: str, line_length: int = 100) -> Path:
    """A git repository shaped like vLLM with one interface gap, FooForCausalLM in foo.py."""
    make_tree(
        root,
        {"model_executor/models/foo.py": source},
        {"_TEXT_GENERATION_MODELS": {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    interfaces = root / "vllm/model_executor/models/interfaces.py"
    interfaces.write_text(interfaces.read_text() + SUPPORTS_EAGLE3_HELPER)
    for rel, text in {
        "vllm/models/__init__.py": "",
        "tests/models/__init__.py": "",
        PACKAGE_TEST: EXISTING_TEST,
        "pyproject.toml": f"[tool.ruff]\nline-length = {line_length}\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add("--all")
    repo.git.commit("-q", "--no-gpg-sign", "-m", "base", env=IDENTITY)
    repo.close()
    return root


def refusal(root: Path, out: Path) -> str:
    with pytest.raises(BotError) as refused:
        pipeline.propose(root, out, class_name="FooForCausalLM")
    assert not (out / "patch.diff").exists(), "a refused proposal must leave no plan behind"
    return str(refused.value)


def assert_tree_untouched(root: Path) -> None:
    repo = git.Repo(root)
    try:
        assert repo.git.status("--porcelain") == ""
    finally:
        repo.close()


def applied(root: Path, plan_dir: Path) -> Path:
    """A clone of ``root`` with the plan's patch applied (made once per plan)."""
    clone = plan_dir.parent / f"{plan_dir.name}-applied"
    if not clone.exists():
        git.Repo.clone_from(str(root), str(clone)).close()
        subprocess.run(["git", "apply", str(plan_dir / "patch.diff")], cwd=clone, check=True)
    return clone


def patched_file(root: Path, plan_dir: Path, rel: str) -> str:
    return (applied(root, plan_dir) / rel).read_text()


def test_a_plain_gap_gets_the_import_the_base_and_a_test(tmp_path: Path) -> None:
    root = foo_tree(tmp_path / "tree", foo_model())
    out = tmp_path / "plan"
    assert pipeline.propose(root, out, class_name="FooForCausalLM").status == "ready"
    assert json.loads((out / "plan.json").read_text())["tests"]["cpu"] == [
        f"{PACKAGE_TEST}::test_foo_for_causal_lm_advertises_eagle3_support"
    ]
    after = patched_file(root, out, MODEL)
    assert "from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP\n" in after
    assert "class FooForCausalLM(nn.Module, SupportsPP, SupportsEagle3):\n" in after
    test_after = patched_file(root, out, PACKAGE_TEST)
    assert "assert supports_eagle3(FooForCausalLM)" in test_after
    # Only the two intended lines of the model file change.
    patch = (out / "patch.diff").read_text()
    model_part = patch.split(f"diff --git a/{MODEL}", 1)[1]
    changed = [ln for ln in model_part.splitlines() if ln[:1] in "+-" and ln[:3] not in "+++---"]
    assert len(changed) == 4, changed
    assert_tree_untouched(root)


def test_a_file_libcst_cannot_reproduce_is_refused(tmp_path: Path) -> None:
    # libcst#1457: `except X :` loses its space in a round trip, so the file is left alone
    # (the lost space is far from the lines the edit means to touch).
    tail = "\n\ntry:\n    import triton\nexcept ImportError :\n    triton = None\n"
    root = foo_tree(tmp_path / "tree", foo_model(tail=tail))
    message = refusal(root, tmp_path / "plan")
    assert f"{MODEL}: libcst does not reproduce line" in message
    assert_tree_untouched(root)


def test_a_change_outside_the_import_block_and_class_header_is_refused(tmp_path: Path) -> None:
    # No module-level import: the new import goes after the docstring, which is not where
    # the file imports (a try block does). The edit would add lines outside both spans.
    head = (
        '"""Foo model.\n\nA multi-line docstring.\n"""\n\n'
        "try:\n"
        "    from torch import nn\n\n"
        "    from .interfaces import EagleModelMixin, SupportsPP\n"
        "except ImportError:\n"
        "    raise\n"
    )
    root = foo_tree(tmp_path / "tree", foo_model(head=head))
    assert [f.class_name for f in pipeline.scan(root, use_cache=False).findings] == [
        "FooForCausalLM"
    ]
    message = refusal(root, tmp_path / "plan")
    assert "outside the intended lines" in message
    assert_tree_untouched(root)


def test_an_edit_that_leaves_the_finding_is_refused(tmp_path: Path) -> None:
    # A module-level class of the same name shadows the imported interface: after the edit
    # the base resolves to the local class, the scan still reports the gap, and the bot says so.
    shadow = "\n\nclass SupportsEagle3:\n    pass\n"
    source = foo_model().replace("\n\nclass FooForCausalLM", shadow + "\n\nclass FooForCausalLM", 1)
    root = foo_tree(tmp_path / "tree", source)
    message = refusal(root, tmp_path / "plan")
    assert "FooForCausalLM is still reported after the edit" in message
    assert_tree_untouched(root)


def test_another_gap_left_in_the_tree_does_not_block_the_fix(tmp_path: Path) -> None:
    # The re-scan is about the finding being fixed: BazForCausalLM, another gap the plan does
    # not touch, is still reported afterwards and that is fine.
    baz = foo_model().replace("Foo", "Baz")
    root = foo_tree(tmp_path / "tree", foo_model())
    (root / "vllm/model_executor/models/baz.py").write_text(baz)
    registry = root / "vllm/model_executor/models/registry.py"
    registry.write_text(
        registry.read_text().replace(
            "}\n", '    "BazForCausalLM": ("baz", "BazForCausalLM"),\n}\n', 1
        )
    )
    repo = git.Repo(root)
    repo.git.add("--all")
    repo.git.commit("-qm", "a second gap", "--no-gpg-sign", env=IDENTITY)
    repo.close()
    assert sorted(f.class_name for f in pipeline.scan(root, use_cache=False).findings) == [
        "BazForCausalLM",
        "FooForCausalLM",
    ]
    out = tmp_path / "plan"
    assert pipeline.propose(root, out, class_name="FooForCausalLM").status == "ready"
    assert "baz.py" not in (out / "patch.diff").read_text()


def test_the_interface_is_imported_the_way_the_file_already_imports_it(tmp_path: Path) -> None:
    # An absolute import of the interfaces module is joined even when the file also has
    # relative imports (which alone would make a new `.interfaces` import the file's style).
    head = (
        "from torch import nn\n\n"
        "from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsPP\n\n"
        "from .utils import maybe_prefix\n"
    )
    root = foo_tree(tmp_path / "tree", foo_model(head=head))
    (root / "vllm/model_executor/models/utils.py").write_text(
        "def maybe_prefix(p, n):\n    return n\n"
    )
    repo = git.Repo(root)
    repo.git.add("--all")
    repo.git.commit("-qm", "utils", "--no-gpg-sign", env=IDENTITY)
    repo.close()
    out = tmp_path / "plan"
    assert pipeline.propose(root, out, class_name="FooForCausalLM").status == "ready"
    after = patched_file(root, out, MODEL)
    assert (
        "from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsEagle3, "
        "SupportsPP\n" in after
    )
    assert "from .interfaces import" not in after


def test_an_architecture_name_finds_the_class_it_registers(tmp_path: Path) -> None:
    root = foo_tree(tmp_path / "tree", foo_model())
    registry = root / "vllm/model_executor/models/registry.py"
    registry.write_text(registry.read_text().replace('"FooForCausalLM": (', '"FooAlias": (', 1))
    repo = git.Repo(root)
    repo.git.commit("-qam", "an architecture name unlike the class", "--no-gpg-sign", env=IDENTITY)
    repo.close()
    plan = pipeline.propose(root, tmp_path / "plan", class_name="FooAlias")
    assert plan.status == "ready" and plan.class_name == "FooForCausalLM"


def test_nothing_to_fix_says_why(tmp_path: Path) -> None:
    fixed = foo_model(head=IMPORTS.replace("SupportsPP", "SupportsEagle3, SupportsPP"))
    fixed = fixed.replace("(nn.Module, SupportsPP):", "(nn.Module, SupportsPP, SupportsEagle3):")
    root = foo_tree(tmp_path / "tree", fixed)
    reasons = {
        name: pipeline.propose(root, tmp_path / name, class_name=name)
        for name in ("FooForCausalLM", "NoSuchForCausalLM")
    }
    assert {p.status for p in reasons.values()} == {"nothing-to-fix"}
    assert reasons["FooForCausalLM"].reason.startswith(
        f"already fixed: FooForCausalLM declares SupportsEagle3 ({MODEL}:"
    )
    assert reasons["NoSuchForCausalLM"].reason == (
        "NoSuchForCausalLM is not a model architecture this tree registers"
    )
    assert (tmp_path / "FooForCausalLM" / "patch.diff").read_text() == ""


def test_a_long_class_header_is_wrapped_the_way_the_trees_ruff_wants(tmp_path: Path) -> None:
    bases = "nn.Module, SupportsPP"
    root = foo_tree(tmp_path / "tree", foo_model(bases=bases), line_length=50)
    out = tmp_path / "plan"
    assert pipeline.propose(root, out, class_name="FooForCausalLM").status == "ready"
    after = patched_file(root, out, MODEL)
    assert "class FooForCausalLM(\n    nn.Module, SupportsPP, SupportsEagle3\n):\n" in after
    assert "from .interfaces import (\n" in after  # the import outgrew 50 columns too
    ast.parse(after)
    # The lines the edit touched are as ruff formats them; the rest of the file was not
    # ruff-clean at 50 columns before the edit and is not the bot's business.
    ruff = Path(sys.executable).with_name("ruff")
    formatted = subprocess.run(
        [str(ruff), "format", "--no-cache", "--stdin-filename", MODEL, "-"],
        cwd=applied(root, out),
        input=after,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "class FooForCausalLM(\n    nn.Module, SupportsPP, SupportsEagle3\n):\n" in formatted
    import_block = after.split("from .interfaces import (\n", 1)[1].split(")\n", 1)[0]
    assert f"from .interfaces import (\n{import_block})\n" in formatted
    assert "SupportsEagle3" in import_block


def test_the_command_reports_a_refusal_in_one_line(tmp_path: Path) -> None:
    tail = "\n\ntry:\n    import triton\nexcept ImportError :\n    triton = None\n"
    root = foo_tree(tmp_path / "tree", foo_model(tail=tail))
    result = propose_class(root, "FooForCausalLM", tmp_path / "plan")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bot: "), result.stderr
    assert "libcst does not reproduce line" in lines[0]
    assert not (tmp_path / "plan").exists()


def test_a_test_file_libcst_cannot_reproduce_is_refused(tmp_path: Path) -> None:
    # The same refusal guards the test file the recipe extends, not only the model file.
    root = foo_tree(tmp_path / "tree", foo_model())
    (root / PACKAGE_TEST).write_text(
        EXISTING_TEST + "\n\ntry:\n    import triton\nexcept ImportError :\n    triton = None\n"
    )
    repo = git.Repo(root)
    repo.git.commit(
        "-qam", "test file with a space before the colon", "--no-gpg-sign", env=IDENTITY
    )
    repo.close()
    message = refusal(root, tmp_path / "plan")
    assert f"{PACKAGE_TEST}: libcst does not reproduce line" in message
    assert_tree_untouched(root)


@pytest.mark.vllm_tree
def test_a_test_registry_libcst_cannot_reproduce_is_refused(tmp_path: Path) -> None:
    # The seed case on a clone of vLLM 0.23.0 whose tests/models/registry.py (where the
    # DFlash entry goes) ends in a construct libcst rewrites.
    from bot.tree.fetch import release_tree

    clone = tmp_path / "vllm"
    git.Repo.clone_from(str(release_tree("0.23.0")), str(clone), shared=True).close()
    registry = clone / "tests/models/registry.py"
    registry.write_text(registry.read_text() + "\ntry:\n    pass\nexcept ImportError :\n    pass\n")
    repo = git.Repo(clone)
    repo.git.commit("-qam", "registry with a space before the colon", "--no-gpg-sign", env=IDENTITY)
    repo.close()
    with pytest.raises(BotError) as refused:
        pipeline.propose(clone, tmp_path / "plan", class_name="Qwen3NextForCausalLM")
    assert "tests/models/registry.py: libcst does not reproduce line" in str(refused.value)
    assert_tree_untouched(clone)
