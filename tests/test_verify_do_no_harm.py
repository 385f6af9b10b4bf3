"""`bot verify`'s local checks, each shown failing on its own through ``verify_plan``.

A small synthetic vLLM tree (a git repository) with one interface gap; each test writes a plan
whose patch breaks exactly one thing: it does not apply, it leaves the finding, it adds a new
finding, it does not compile, or it adds a ruff violation. The check named for the problem
must fail, and the verdict must be a failure. A patch the recipe would not make also fails
``confined`` (and then nothing from the tree runs: tests/test_token_isolation.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.plan import READY, Plan, write_plan_dir
from bot.recipes.base import DeclaredEdit, FindingRef
from bot.verification import Verification
from bot.verify import VerifyOptions, verify_plan
from tests.synthetic import make_tree
from tests.test_verify_local import (
    FOO_MODEL,
    PR_MARKDOWN,
    checks_by_name,
    commit_all,
    finding_for,
    make_patch,
)

MODEL = "vllm/model_executor/models/foo.py"
REGISTRY = "vllm/model_executor/models/registry.py"
DECLARE = ("(nn.Module, SupportsPP):", "(nn.Module, SupportsPP, SupportsEagle3):")
# A second gap the patch brings in: a new registered class over the same ready decoder.
FOO_KEY, BAR_KEY = ("eagle3-interface", "FooForCausalLM"), ("eagle3-interface", "BarForCausalLM")
NEW_GAP = """

class BarForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = FooModel(vllm_config=vllm_config, prefix=prefix)
"""


@pytest.fixture(autouse=True)
def bot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_HOME", str(tmp_path / "bot-home"))


def gap_repo(
    root: Path, model: str = FOO_MODEL, classes: tuple[str, ...] = ("FooForCausalLM",)
) -> tuple[Path, str]:
    """A tree whose foo.py is ``model``, registering ``classes``; and its commit."""
    make_tree(
        root,
        {"model_executor/models/foo.py": model},
        {"_TEXT_GENERATION_MODELS": {name: ("foo", name) for name in classes}},
    )
    return root, commit_all(root)


def verify(
    tmp_path: Path,
    edits: list[tuple[str, str, str]],
    patch: str | None = None,
    *,
    resolves: list[FindingRef] | None = None,
    **tree: Any,
) -> dict:
    """Verify (no GPU) a plan for FooForCausalLM whose patch makes ``edits`` (or is ``patch``),
    on the tree :func:`gap_repo` makes of ``tree``; the plan records ``resolves``, if given."""
    repo, base = gap_repo(tmp_path / "vllm-synthetic", **tree)
    plan = Plan(
        status=READY,
        reason="only the declaration is missing",
        recipe="eagle3-interface",
        class_name="FooForCausalLM",
        repo_path=str(repo),
        base_commit=base,
        finding=finding_for(repo, "FooForCausalLM"),
        edits=[DeclaredEdit(MODEL, "declare-interface", "")],
        resolves=resolves or [],
    )
    write_plan_dir(tmp_path / "plan", plan, patch or make_patch(repo, base, edits), PR_MARKDOWN)
    return verify_plan(tmp_path / "plan", VerifyOptions(gpu="skip"))


def failed(verification: Verification) -> list[str]:
    return [c.name for c in verification.checks if c.passed is False]


def test_the_right_patch_passes_every_local_check(tmp_path: Path) -> None:
    verification = verify(tmp_path, [(MODEL, *DECLARE)])
    checks = checks_by_name(verification)
    assert [c.name for c in verification.checks] == [
        "apply",
        "confined",
        "rescan",
        "py_compile",
        "ruff",
        "cpu-tests",
        "smoke",
        "engine",
    ]
    assert checks["engine"]["passed"] is None  # not run here, and never called passed
    assert checks["engine"]["detail"].startswith("not checked: ")
    for name in ("apply", "confined", "rescan", "py_compile", "ruff"):
        assert checks[name]["passed"] is True, checks[name]
    assert "FooForCausalLM no longer found" in checks["rescan"]["detail"]
    assert "1 file(s) compile" in checks["py_compile"]["detail"]
    assert verification.local_passed is True


def test_a_patch_that_does_not_apply_fails_apply(tmp_path: Path) -> None:
    repo, base = gap_repo(tmp_path / "elsewhere")
    # Made against a file whose lines next to the class header differ from the plan's base.
    init = "        super().__init__()\n"
    (repo / MODEL).write_text(FOO_MODEL.replace(init, init.rstrip() + "  # changed\n"))
    stale = make_patch(repo, commit_all(repo), [(MODEL, *DECLARE)])
    verification = verify(tmp_path, [], patch=stale)
    assert failed(verification) == ["apply"]
    assert [c.name for c in verification.checks] == ["apply"]
    assert verification.local_passed is False


def test_a_patch_that_leaves_the_finding_fails_rescan(tmp_path: Path) -> None:
    # Imports the interface (used, so ruff is content) but declares it on no class.
    verification = verify(
        tmp_path,
        [
            (
                MODEL,
                "        super().__init__()\n",
                "        super().__init__()\n        assert SupportsEagle3\n",
            )
        ],
    )
    assert failed(verification) == ["confined", "rescan"]
    assert (
        "FooForCausalLM (eagle3-interface) is still found after the patch"
        in (checks_by_name(verification)["rescan"]["detail"])
    )
    assert verification.local_passed is False


def test_a_patch_that_brings_a_new_finding_fails_rescan(tmp_path: Path) -> None:
    registry_line = '    "FooForCausalLM": ("foo", "FooForCausalLM"),\n'
    verification = verify(
        tmp_path,
        [
            (MODEL, *DECLARE),
            (
                MODEL,
                "        self.model = FooModel(vllm_config=vllm_config, prefix=prefix)\n",
                "        self.model = FooModel(vllm_config=vllm_config, prefix=prefix)\n" + NEW_GAP,
            ),
            (
                REGISTRY,
                registry_line,
                registry_line + '    "BarForCausalLM": ("foo", "BarForCausalLM"),\n',
            ),
        ],
    )
    assert failed(verification) == ["confined", "rescan"]
    detail = checks_by_name(verification)["rescan"]["detail"]
    assert detail == f"new findings after the patch: BarForCausalLM in {MODEL} (eagle3-interface)"


def test_the_rescan_checks_every_finding_the_plan_resolves(tmp_path: Path) -> None:
    # Two gaps, and a plan that says its fix resolves both: declaring the interface on one
    # leaves the other, which verify's re-scan must name (not only the plan's own finding).
    foo = ("class FooForCausalLM" + DECLARE[0], "class FooForCausalLM" + DECLARE[1])
    verification = verify(
        tmp_path,
        [(MODEL, *foo)],
        model=FOO_MODEL + NEW_GAP,
        classes=("FooForCausalLM", "BarForCausalLM"),
        resolves=[FindingRef(*FOO_KEY, MODEL), FindingRef(*BAR_KEY, MODEL)],
    )
    assert failed(verification) == ["rescan"]
    detail = checks_by_name(verification)["rescan"]["detail"]
    assert detail == "BarForCausalLM (eagle3-interface) is still found after the patch"


def test_a_patch_that_does_not_compile_fails_py_compile(tmp_path: Path) -> None:
    # Valid to ruff's parser and to the scan's (a late `from __future__` is a compile-time
    # error only), so py_compile is the check that must catch it.
    verification = verify(
        tmp_path,
        [
            (MODEL, *DECLARE),
            (MODEL, "class FooModel(", "from __future__ import annotations\n\n\nclass FooModel("),
        ],
    )
    assert "py_compile" in failed(verification)
    detail = checks_by_name(verification)["py_compile"]["detail"]
    assert detail.startswith(f"{MODEL}: SyntaxError")
    assert verification.local_passed is False


def test_a_patch_that_adds_a_ruff_violation_fails_ruff(tmp_path: Path) -> None:
    init = "        super().__init__()\n"
    verification = verify(
        tmp_path, [(MODEL, *DECLARE), (MODEL, init, init + "        unused = 1\n")]
    )
    assert failed(verification) == ["confined", "ruff"]
    assert checks_by_name(verification)["ruff"]["detail"] == f"new ruff violations: F841 in {MODEL}"
    assert verification.local_passed is False
