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
from bot.drafts import DraftEntry, accept_draft, user_catalogue_path, write_catalogue_file
from bot.errors import BotError
from bot.plan import NEEDS_INFO, read_plan_dir, update_plan, write_plan_dir
from bot.publish.pr import publish_plan
from bot.tree.fetch import release_tree
from tests.attest import READS
from tests.claimed import claimed
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
    plan.verification = claimed(plan.verification, patch_hash=patch_hash(new_patch))
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
        "not the edit the recipe makes",
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
    # The registry entry's fields are re-derived at publish from the base text and the bot's
    # own reviewed draft catalogue; the plan's registry_entry is never read.
    "registry-entry-unknown-draft": (
        REGISTRY,
        '        speculative_model="z-lab/Qwen3-Coder-Next-DFlash",',
        '        speculative_model="mallory/Qwen3-Coder-Next-DFlash",',
        "draft mallory/Qwen3-Coder-Next-DFlash is not in the bot's draft catalogue",
    ),
    "registry-entry-other-target": (
        REGISTRY,
        '        "Qwen/Qwen3-Coder-Next",\n        speculative_model=',
        '        "mallory/Qwen3-Coder-Next",\n        speculative_model=',
        "target checkpoint .* is not 'Qwen/Qwen3-Coder-Next'",
    ),
    "registry-entry-changed-field": (
        REGISTRY,
        "        max_model_len=8192,\n        max_num_seqs=32,\n        min_transformers",
        "        max_model_len=65536,\n        max_num_seqs=32,\n        min_transformers",
        "field max_model_len is not the value derived",
    ),
    "registry-entry-extra-field": (
        REGISTRY,
        _ENTRY_END,
        '        min_transformers_version="4.56.3",\n'
        '        revision="refs/pr/1",\n    ),\n    # [Eagle]',
        "field revision comes from neither",
    ),
    "registry-entry-dropped-field": (
        REGISTRY,
        "        max_num_seqs=32,\n        min_transformers",
        "        min_transformers",
        "lacks max_num_seqs",
    ),
    "registry-entry-other-key": (
        REGISTRY,
        '    "DFlashQwen3NextDraftModel": _HfExamplesInfo(',
        '    "DFlashQwen3NextDraftModelX": _HfExamplesInfo(',
        "key DFlashQwen3NextDraftModelX is not DFlashQwen3NextDraftModel",
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
        ("Co-authored-by: Trusted", "trailer-looking"),
        # With an address in angle brackets the raw-HTML check refuses it first.
        ("Co-authored-by: Trusted <t@example.invalid>", "raw HTML|trailer-looking"),
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
    assert (
        publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS).action
        == "opened"
    )


def test_a_question_cannot_ping_anyone(seed, upstream_standin):
    plan_dir, work_dir = seed
    planned = read_plan_dir(plan_dir)
    plan = planned.plan
    plan.status = NEEDS_INFO
    plan.questions = ["Which model? `@vllm-project/maintainers` please look"]
    write_plan_dir(plan_dir, plan, "", planned.pr_markdown)
    with pytest.raises(BotError, match="@mention"):
        publish_plan(plan_dir, reviewer=None, work_dir=work_dir, attest=READS)
    assert upstream_standin.comments(UPSTREAM, 33329) == []


HUB_DRAFT = "hub-user/Qwen3-Next-DFlash-b"


def test_a_registry_entry_from_an_unreviewed_hub_draft_waits_for_acceptance(
    seed, upstream_standin, monkeypatch, tmp_path
):
    """The patch's entry is exactly what the bot derives for a Hub draft: refused while the
    catalogue entry is unreviewed (refreshed), published once a maintainer accepts it."""
    plan_dir, work_dir = seed
    _rewrite(
        plan_dir,
        REGISTRY,
        lambda s: s.replace("z-lab/Qwen3-Coder-Next-DFlash", HUB_DRAFT, 1).replace(
            '        "Qwen/Qwen3-Coder-Next",\n        speculative_model=',
            '        "hub-user/Qwen3-Next-Base",\n        speculative_model=',
            1,
        ),
    )
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))  # the bot's configured cache
    hub = DraftEntry(
        repo_id=HUB_DRAFT,
        method="dflash",
        target_repo_id="hub-user/Qwen3-Next-Base",
        target_arch="Qwen3NextForCausalLM",
        source="hub: model card",
        reviewed=False,
    )
    write_catalogue_file(user_catalogue_path(), [hub], "refreshed")
    _refused(plan_dir, work_dir, upstream_standin, f"draft {HUB_DRAFT} is an unreviewed")

    accept_draft(HUB_DRAFT)
    assert (
        publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS).action
        == "opened"
    )


def test_a_refreshed_card_does_not_change_the_reviewed_target(
    seed, upstream_standin, monkeypatch, tmp_path
):
    """A Hub refresh re-opens the curated draft with another target: the patch that follows the
    card is refused, the reviewed facts still decide."""
    plan_dir, work_dir = seed
    _rewrite(
        plan_dir,
        REGISTRY,
        lambda s: s.replace(
            '        "Qwen/Qwen3-Coder-Next",\n        speculative_model=',
            '        "hub-user/Qwen3-Coder-Next-trojan",\n        speculative_model=',
            1,
        ),
    )
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    refreshed = DraftEntry(
        repo_id="z-lab/Qwen3-Coder-Next-DFlash",
        method="dflash",
        target_repo_id="hub-user/Qwen3-Coder-Next-trojan",
        target_arch="Qwen3NextForCausalLM",
        source="hub: model card",
        reviewed=False,
    )
    write_catalogue_file(user_catalogue_path(), [refreshed], "refreshed")
    _refused(plan_dir, work_dir, upstream_standin, "is not 'Qwen/Qwen3-Coder-Next'")


def test_the_derived_entry_in_another_place_of_the_dict_is_refused(seed, upstream_standin):
    plan_dir, work_dir = seed
    entry_start = '    "DFlashQwen3NextDraftModel": _HfExamplesInfo(\n'
    entry_end = '        min_transformers_version="4.56.3",\n    ),\n'

    def move_to_the_top(text: str) -> str:
        start = text.index(entry_start)
        end = text.index(entry_end, start) + len(entry_end)
        entry = text[start:end]
        text = text[:start] + text[end:]
        top = "_SPECULATIVE_DECODING_EXAMPLE_MODELS = {\n"
        return text.replace(top, top + entry, 1)

    _rewrite(plan_dir, REGISTRY, move_to_the_top)
    _refused(plan_dir, work_dir, upstream_standin, "not where the recipe puts it")
