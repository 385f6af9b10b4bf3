"""Independent security review: publish's confinement re-check against a tampered artifact.

Each test rewrites the seed plan's patch the way a compromised unprivileged job could (and
records the new patch hash as verified, as that job would), keeping every change inside the
spans the recipe may touch; the privileged publisher must still push nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import git
import pytest

from bot.content_hash import patch_hash
from bot.errors import BotError
from bot.plan import NEEDS_INFO, read_plan_dir, update_plan, write_plan_dir
from bot.publish import publish_plan
from bot.tree.fetch import release_tree
from tests.conftest import UPSTREAM
from tests.test_publish_trust import MODEL_FILE, _apply_own_then, _diff, _model_file_diff, _refused

pytestmark = pytest.mark.vllm_tree

TEST_FILE = "tests/models/test_registry.py"
REGISTRY = "tests/models/registry.py"


def _rewrite(plan_dir: Path, path: str, change: Callable[[str], str]) -> None:
    """Replace ``path``'s hunks in patch.diff by the bot's own edit followed by ``change``."""
    patch = (plan_dir / "patch.diff").read_text()
    source = git.Repo(release_tree("0.23.0")).git.show(f"HEAD:{path}") + "\n"
    own = _model_file_diff(patch, path)
    fixed = _apply_own_then(own, source, None, path)
    planted = change(fixed)
    assert planted != fixed
    new_patch = patch.replace(own, _diff(path, source, planted))
    (plan_dir / "patch.diff").write_text(new_patch)
    plan = read_plan_dir(plan_dir).plan
    plan.verification = {**plan.verification, "patch_hash": patch_hash(new_patch)}
    update_plan(plan_dir, plan)


@pytest.fixture
def seed(seed_plan: Path, upstream_standin, tmp_path: Path):
    return seed_plan, tmp_path / "work"


_PARAMETRIZE = '@pytest.mark.parametrize("model_arch", ["Qwen3NextForCausalLM"])'
_ENTRY_END = '        min_transformers_version="4.56.3",\n    ),\n    # [Eagle]'

# (file, text after the bot's own edit, what the compromised job puts there, refusal words)
TAMPERED_PATCHES = {
    # Runs at `import vllm.model_executor.models.qwen3_next`; the class statement rebinds it.
    "assignment-named-like-the-class": (
        MODEL_FILE,
        "from .interfaces import (",
        "Qwen3NextForCausalLM = __import__('os').system('id')\nfrom .interfaces import (",
        "outside the declared edit",
    ),
    # Runs when upstream's CI collects tests/models/test_registry.py; the def rebinds it.
    "assignment-named-like-the-test": (
        TEST_FILE,
        _PARAMETRIZE,
        "test_registry_supports_eagle3 = __import__('os').system('id')\n" + _PARAMETRIZE,
        "outside the declared edit",
    ),
    "shadowed-test-with-hostile-decorator": (
        TEST_FILE,
        _PARAMETRIZE,
        "@(lambda f: __import__('os').system('id'))\n"
        "def test_registry_supports_eagle3():\n    pass\n\n\n" + _PARAMETRIZE,
        "outside the declared edit",
    ),
    "registry-entry-trust-remote-code": (
        REGISTRY,
        _ENTRY_END,
        '        min_transformers_version="4.56.3",\n'
        "        trust_remote_code=True,\n    ),\n    # [Eagle]",
        "trust_remote_code",
    ),
    "registry-entry-runs-code": (
        REGISTRY,
        '        speculative_model="z-lab/Qwen3-Coder-Next-DFlash",',
        '        speculative_model=__import__("os").system("id"),',
        "registry entry",
    ),
}


@pytest.mark.parametrize("case", TAMPERED_PATCHES)
def test_a_tampered_patch_inside_the_declared_spans_is_refused(case, seed, upstream_standin):
    path, old, new, refusal = TAMPERED_PATCHES[case]
    plan_dir, work_dir = seed
    _rewrite(plan_dir, path, lambda s: s.replace(old, new, 1))
    _refused(plan_dir, work_dir, upstream_standin, refusal)


@pytest.mark.parametrize(
    ("planted", "problem"),
    [
        ("Please merge, @vllm-project/maintainers.", "@mention"),
        ("Closes #1", "closing keyword for #1"),
        ("fixes vllm-project/vllm#33329", "closing keyword"),
        ("Co-authored-by: Trusted <t@example.invalid>", "trailer-looking"),
    ],
)
def test_the_pr_body_cannot_ping_close_other_issues_or_carry_trailers(
    seed, upstream_standin, planted, problem
):
    # The Action publishes without a maintainer's review hash: pr.md is only the artifact's.
    plan_dir, work_dir = seed
    pr_md = plan_dir / "pr.md"
    pr_md.write_text(pr_md.read_text() + f"\n{planted}\n")
    _refused(plan_dir, work_dir, upstream_standin, problem)


def test_mentions_and_references_inside_code_are_left_alone(seed, upstream_standin):
    plan_dir, work_dir = seed
    pr_md = plan_dir / "pr.md"
    pr_md.write_text(
        pr_md.read_text() + "\n```text\nE   @pytest.fixture failed; fixes #12\n```\n`@x`\n"
    )
    assert publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir).action == "opened"


def test_a_question_cannot_ping_anyone(seed, upstream_standin):
    plan_dir, work_dir = seed
    planned = read_plan_dir(plan_dir)
    plan = planned.plan
    plan.status = NEEDS_INFO
    plan.questions = ["Which model? `@vllm-project/maintainers` please look"]
    write_plan_dir(plan_dir, plan, "", planned.pr_markdown)
    with pytest.raises(BotError, match="@mention"):
        publish_plan(plan_dir, reviewer=None, work_dir=work_dir)
    assert upstream_standin.comments(UPSTREAM, 33329) == []
