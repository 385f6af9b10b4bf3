"""The privileged half trusts nothing in the plan artifact it can re-derive.

Each attack edits the bot's own seed plan (from `bot propose` + `bot verify` on vLLM 0.23.0)
the way a compromised unprivileged job could, then runs the real publisher against the GitHub
stand-in and a bare fork: nothing may be pushed and no pull request opened. A group plan's
members are checked on a group the bot proposes for two interface gaps of a synthetic tree.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import git
import pytest

from bot import pipeline
from bot.config import github_settings
from bot.content_hash import patch_hash, review_hash
from bot.errors import BotError
from bot.plan import READY, Member, read_plan_dir, update_plan
from bot.publish.checks import check_plan_fields, pull_request_title
from bot.publish.pr import publish_plan
from bot.recipes.cases import SyntheticTree
from bot.recipes.eagle3_interface import cases as interface_cases
from bot.recipes.grouping import INTERFACE_ONLY
from bot.tree.fetch import release_tree
from tests.attest import READS
from tests.claimed import claimed
from tests.cli import EXAMPLE_ISSUE
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_FORK_OWNER
from tests.test_recipe_cases import build

pytestmark = pytest.mark.vllm_tree

MODEL_FILE = "vllm/model_executor/models/qwen3_next.py"


def _hunk(path: str, edit: Callable[[str], str]) -> str:
    """A git-style diff of ``edit`` applied to ``path`` as it is at the seed's base commit."""
    tree = git.Repo(release_tree("0.23.0"))
    before = tree.git.show(f"HEAD:{path}") + "\n"
    after = edit(before)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def _tamper(plan_dir: Path, extra: str, *, reverify: bool = True) -> None:
    """Add ``extra`` to patch.diff; with ``reverify`` also record its hash as verified, as a
    compromised verify step would, so that only the confinement check stands in the way."""
    patch = (plan_dir / "patch.diff").read_text(encoding="utf-8") + extra
    (plan_dir / "patch.diff").write_text(patch, encoding="utf-8")
    if reverify:
        plan = read_plan_dir(plan_dir).plan
        plan.verification = claimed(plan.verification, patch_hash=patch_hash(patch))
        update_plan(plan_dir, plan)


def _edit_plan(plan_dir: Path, **fields: object) -> None:
    data = json.loads((plan_dir / "plan.json").read_text())
    data.update(fields)
    members = data.get("members") or []
    if len(members) == 1:  # a single-class plan is a group of one: its member says the same
        members[0].update({k: v for k, v in fields.items() if k in members[0]})
    (plan_dir / "plan.json").write_text(json.dumps(data))


def _refused(plan_dir: Path, work_dir: Path, standin, match: str, **kwargs) -> None:
    with pytest.raises(BotError, match=match):
        publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, **kwargs, attest=READS)
    assert standin.pulls(UPSTREAM) == []
    fork = git.Repo(standin.state.repos[FORK].git_dir)
    assert not [h for h in fork.heads if h.name.startswith("bot/")]


@pytest.fixture
def seed(seed_plan: Path, upstream_standin, tmp_path: Path):
    return seed_plan, tmp_path / "work"


def test_an_extra_hunk_in_an_unrelated_file_is_refused(seed, upstream_standin):
    plan_dir, work_dir = seed
    _tamper(plan_dir, _hunk("vllm/envs.py", lambda s: s + "import os\nos.system('id')\n"))
    _refused(plan_dir, work_dir, upstream_standin, "vllm/envs.py, which the plan's edits do not")


def test_an_extra_hunk_outside_the_declared_span_is_refused(seed, upstream_standin):
    plan_dir, work_dir = seed
    patch = (plan_dir / "patch.diff").read_text()
    # The model file's own hunks, plus one far below the class header: rebuild that file's
    # diff from the tree so the patch still applies.
    tree = git.Repo(release_tree("0.23.0"))
    source = tree.git.show(f"HEAD:{MODEL_FILE}") + "\n"
    lines = source.splitlines(keepends=True)
    lines.append("\nimport os  # planted\n")
    planted = "".join(lines)
    own = _model_file_diff(patch)
    tampered_model = _apply_own_then(own, source, planted)
    new_patch = patch.replace(own, _diff(MODEL_FILE, source, tampered_model))
    (plan_dir / "patch.diff").write_text(new_patch)
    plan = read_plan_dir(plan_dir).plan
    plan.verification = claimed(plan.verification, patch_hash=patch_hash(new_patch))
    update_plan(plan_dir, plan)
    _refused(plan_dir, work_dir, upstream_standin, "outside the intended lines")


def test_a_decorator_slipped_into_the_class_header_is_refused(seed, upstream_standin):
    plan_dir, work_dir = seed
    patch = (plan_dir / "patch.diff").read_text()
    tree = git.Repo(release_tree("0.23.0"))
    source = tree.git.show(f"HEAD:{MODEL_FILE}") + "\n"
    own = _model_file_diff(patch)
    fixed = _apply_own_then(own, source, None)
    planted = fixed.replace(
        "class Qwen3NextForCausalLM(", "@__import__('os').system\nclass Qwen3NextForCausalLM(", 1
    )
    new_patch = patch.replace(own, _diff(MODEL_FILE, source, planted))
    (plan_dir / "patch.diff").write_text(new_patch)
    plan = read_plan_dir(plan_dir).plan
    plan.verification = claimed(plan.verification, patch_hash=patch_hash(new_patch))
    update_plan(plan_dir, plan)
    _refused(
        plan_dir,
        work_dir,
        upstream_standin,
        "Qwen3NextForCausalLM is not the edit the recipe makes: expected nothing, the patch has `@",
    )


def test_a_planted_line_in_the_regression_test_is_refused(seed, upstream_standin):
    plan_dir, work_dir = seed
    test_file = "tests/models/test_registry.py"
    patch = (plan_dir / "patch.diff").read_text()
    source = git.Repo(release_tree("0.23.0")).git.show(f"HEAD:{test_file}") + "\n"
    own = _model_file_diff(patch, test_file)
    fixed = _apply_own_then(own, source, None, test_file)
    planted = fixed.replace(
        "    assert supports_eagle3(model_cls)\n",
        "    assert supports_eagle3(model_cls)\n    __import__('os').system('id')\n",
    )
    assert planted != fixed
    new_patch = patch.replace(own, _diff(test_file, source, planted))
    (plan_dir / "patch.diff").write_text(new_patch)
    plan = read_plan_dir(plan_dir).plan
    plan.verification = claimed(plan.verification, patch_hash=patch_hash(new_patch))
    update_plan(plan_dir, plan)
    _refused(plan_dir, work_dir, upstream_standin, "not the regression test the recipe writes")


def _model_file_diff(patch: str, path: str = MODEL_FILE) -> str:
    start = patch.index(f"diff --git a/{path}")
    end = patch.find("diff --git", start + 1)
    return patch[start:] if end == -1 else patch[start:end]


def _diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def _apply_own_then(own: str, source: str, planted: str | None, path: str = MODEL_FILE) -> str:
    """``source`` with the bot's own hunks applied (by git), plus ``planted``'s extra tail."""
    with tempfile.TemporaryDirectory() as scratch:
        work = git.Repo.init(scratch)
        target = Path(scratch) / path
        target.parent.mkdir(parents=True)
        target.write_text(source)
        (Path(scratch) / "own.diff").write_text(own)
        work.git.apply("own.diff")
        fixed = target.read_text()
    return fixed if planted is None else fixed + planted[len(source) :]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("title", "Declare it\n\nSigned-off-by: Mallory <m@evil.example>", "single line"),
        ("reason", "Reviewed-by: Trusted Maintainer", "trailer-looking"),
        ("reason", "as agreed with @vllm-project/maintainers", "@mention"),
        ("title", "Co-authored-by: someone", "trailer-looking"),
        ("class_name", "Qwen3Next\nReviewed-by: x", "not a Python identifier"),
        ("title", "T" * 121, "longer than 120 characters"),
    ],
)
def test_commit_text_comes_only_from_validated_fields(
    seed, upstream_standin, field, value, problem
):
    plan_dir, work_dir = seed
    _edit_plan(plan_dir, **{field: value})
    _refused(plan_dir, work_dir, upstream_standin, problem)


def test_a_title_of_exactly_the_limit_is_the_prs_title(seed):
    plan_dir, _ = seed
    planned = read_plan_dir(plan_dir)
    title = "T" * 120
    (plan_dir / "pr.md").write_text(planned.pr_markdown.replace(planned.pr_title, title, 1))
    _edit_plan(plan_dir, title=title)
    assert pull_request_title(read_plan_dir(plan_dir)) == title


def test_repo_path_is_never_an_object_source(seed, upstream_standin, tmp_path):
    plan_dir, work_dir = seed
    planted = git.Repo.init(tmp_path / "planted")  # an attacker's object store
    _edit_plan(plan_dir, repo_path=str(tmp_path / "planted"))
    result = publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    assert result.action == "opened"
    alternates = work_dir / "objects" / "info" / "alternates"
    assert not alternates.exists() or str(planted.git_dir) not in alternates.read_text()
    _edit_plan(plan_dir, repo_path="/nonexistent/checkout")
    assert (
        publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS).action
        == "unchanged"
    )


def test_only_the_verified_patch_is_published(seed, upstream_standin):
    plan_dir, work_dir = seed
    extra = _hunk("vllm/envs.py", lambda s: s + "PLANTED = 1\n")
    _tamper(plan_dir, extra, reverify=False)
    _refused(plan_dir, work_dir, upstream_standin, "not the patch that was verified")
    _edit_plan(plan_dir, verification=None)
    _refused(plan_dir, work_dir, upstream_standin, "has not been verified")


def test_an_approved_hash_must_match_the_bytes_on_disk(seed, upstream_standin):
    plan_dir, work_dir = seed
    planned = read_plan_dir(plan_dir)
    seen = review_hash(planned.patch, planned.pr_markdown, planned.plan)
    (plan_dir / "pr.md").write_text(planned.pr_markdown + "\nA line nobody reviewed.\n")
    _refused(
        plan_dir, work_dir, upstream_standin, "not what the maintainer approved", approved_hash=seen
    )
    (plan_dir / "pr.md").write_text(planned.pr_markdown)
    result = publish_plan(
        plan_dir, reviewer="maintainer1", work_dir=work_dir, approved_hash=seen, attest=READS
    )
    assert result.action == "opened"


# plan.json fields publish writes with, each changed (to a value that passes every other
# check) after the maintainer approved: the approval covers them, so each is refused.
CHANGED_AFTER_APPROVAL = {
    "issue_number": 1,  # "Fixes #1" and the sticky comment on another issue
    "issue_comment": "A fix is ready; nothing else to see.",
    "reason": "A different commit body than the one reviewed",
    "verification": "passed",  # the PR would leave draft without a GPU run
    "status": "needs-info",  # questions posted instead of the reviewed PR
    "edits": "dropped",
}


@pytest.mark.parametrize("field", CHANGED_AFTER_APPROVAL)
def test_a_plan_field_changed_after_approval_is_refused(seed, upstream_standin, field):
    plan_dir, work_dir = seed
    planned = read_plan_dir(plan_dir)
    seen = review_hash(planned.patch, planned.pr_markdown, planned.plan)
    data = json.loads((plan_dir / "plan.json").read_text())
    value = CHANGED_AFTER_APPROVAL[field]
    if field == "verification":
        value = {**data["verification"], "passed": True}
    elif field == "status":
        data["questions"] = ["Which model?"]
    elif field == "edits":
        value = data["edits"][:-1]
    data[field] = value
    (plan_dir / "plan.json").write_text(json.dumps(data))
    _refused(
        plan_dir, work_dir, upstream_standin, "not what the maintainer approved", approved_hash=seen
    )
    assert upstream_standin.comments(UPSTREAM, 1) == []
    assert upstream_standin.comments(UPSTREAM, 33329) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("branch", "bot/eagle3-interface/llama-for-causal-lm"),  # another fix's branch and PR
        ("fingerprint", "eagle3-interface:LlamaForCausalLM:0123456789ab"),
    ],
)
def test_branch_and_fingerprint_are_re_derived(seed, upstream_standin, field, value):
    # The Action publishes without a review hash: these are derived again, not trusted.
    plan_dir, work_dir = seed
    _edit_plan(plan_dir, **{field: value})
    _refused(plan_dir, work_dir, upstream_standin, "branch or fingerprint is not the one")


def test_a_plan_for_another_upstream_is_refused(seed, upstream_standin, monkeypatch, tmp_path):
    plan_dir, work_dir = seed
    monkeypatch.setenv("BOT_UPSTREAM", "example/vllm-staging")
    _refused(plan_dir, work_dir, upstream_standin, "not the configured upstream")

    # And propose records the configured upstream, so a staging setup targets staging.
    out = tmp_path / "staging-plan"
    pipeline.propose(release_tree("0.23.0"), out, issue=json.loads(EXAMPLE_ISSUE.read_text()))
    assert read_plan_dir(out).plan.upstream == "example/vllm-staging"


def _iso(hours_ago: float) -> str:
    moment = datetime.now(UTC) - timedelta(hours=hours_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_hourly_cap_counts_pull_requests_on_github(
    seed, upstream_standin, monkeypatch, tmp_path
):
    # Earlier runs (each with a fresh BOT_HOME, as in Actions) opened two PRs this hour.
    plan_dir, work_dir = seed
    monkeypatch.setenv("BOT_HOME", str(tmp_path / "fresh-home"))
    monkeypatch.setenv("BOT_MAX_PRS_PER_HOUR", "2")
    upstream_standin.add_pull(UPSTREAM, f"{STANDIN_FORK_OWNER}:bot/x/one", user="someone")
    upstream_standin.add_pull(UPSTREAM, "elsewhere:feature", user=STANDIN_BOT_LOGIN)
    upstream_standin.add_pull(UPSTREAM, "human:feature", user="human")  # not ours
    result = publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS)
    assert result.action == "rate-limited" and "2 PR(s)" in result.message
    assert [
        p["number"] for p in upstream_standin.pulls(UPSTREAM) if "bot/eagle3" in p["head"]["label"]
    ] == []

    # An hour later the same two no longer count.
    for item in upstream_standin.state.issues.values():
        item["created_at"] = _iso(1.5)
    assert (
        publish_plan(plan_dir, reviewer="maintainer1", work_dir=work_dir, attest=READS).action
        == "opened"
    )


# A group plan (one PR, a commit per class) is checked member by member. Two interface gaps of
# a synthetic tree make one in seconds; tests/test_publish_group.py publishes a real one.
def _two_interface_gaps() -> SyntheticTree:
    foo = interface_cases.GAP.tree
    bar = {p.replace("foo", "bar"): t.replace("Foo", "Bar") for p, t in foo.files.items()}
    registry = {
        d: {**e, "BarForCausalLM": ("bar", "BarForCausalLM")} for d, e in foo.registry.items()
    }
    return SyntheticTree({**foo.files, **bar}, registry)


def _group_plan(tmp_path: Path) -> Path:
    root = build(_two_interface_gaps(), tmp_path / "base")
    ranked, groups = pipeline.find_groups(root)
    out = tmp_path / "group-plan"
    plan, left_out = pipeline.propose_group(
        root, out, INTERFACE_ONLY, ranked=ranked, groups=groups, upstream=UPSTREAM, dedupe=False
    )
    assert plan.status == READY and left_out == [] and len(plan.members) == 2
    assert plan.base_commit  # each member's fingerprint is derived with it
    return out


def test_a_group_plan_passes_the_field_checks(tmp_path):
    check_plan_fields(read_plan_dir(_group_plan(tmp_path)), github_settings())


def _refused_member(plan_dir: Path, problem: str, change: Callable[[Member], Member]) -> None:
    """The group plan with its first member changed is refused by the field checks."""
    plan = read_plan_dir(plan_dir).plan
    update_plan(
        plan_dir, dataclasses.replace(plan, members=[change(plan.members[0]), *plan.members[1:]])
    )
    with pytest.raises(BotError, match=problem):
        check_plan_fields(read_plan_dir(plan_dir), github_settings())


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"issues": [0]}, "not an issue number"),  # refused as plan.json is read
        ({"issues": [10**9]}, "not issue numbers"),
        ({"title": "T" * 121}, "longer than 120 characters"),
    ],
)
def test_a_tampered_group_member_is_refused(tmp_path, change, problem):
    _refused_member(_group_plan(tmp_path), problem, lambda m: dataclasses.replace(m, **change))


@pytest.mark.parametrize(
    ("malformed", "problem"),
    [
        (lambda f: {**f, "line": "seven"}, "member's finding: `line` must be int"),
        (lambda f: {**f, "line": None}, "member's finding: `line` must be int"),
        (lambda f: {k: v for k, v in f.items() if k != "recipe"}, "names no recipe"),
        (
            lambda f: {**f, "evidence": {**f["evidence"], "decoder": None}},
            r"member's finding\.evidence\.decoder must be an object",
        ),
    ],
    ids=["line-not-a-number", "line-null", "no-recipe", "evidence-without-its-decoder"],
)
def test_a_malformed_member_finding_is_refused(tmp_path, malformed, problem):
    _refused_member(
        _group_plan(tmp_path),
        problem,
        lambda m: dataclasses.replace(m, finding=malformed(dict(m.finding))),
    )
