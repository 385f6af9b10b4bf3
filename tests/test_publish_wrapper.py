"""`bot publish` re-checks an eagle3-wrapper plan with the wrapper recipe's own rules.

The plans are the bot's own (`bot propose --class` + `bot verify --gpu skip` on a clone of vLLM
0.34.0); the upstream and the fork on the GitHub stand-in are seeded from the same tree. A
tampered plan is re-verified (its patch hash recorded, as a compromised verify job would) so
that only the recipe's publish-time rule stands in the way.
"""

from __future__ import annotations

import ast
import difflib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from bot.content_hash import patch_hash
from bot.errors import BotError
from bot.plan import read_plan_dir, update_plan
from bot.propose.proposal import branch_name
from bot.publish.pr import publish_plan
from bot.tree.fetch import release_tree
from bot.verify import VerifyOptions, verify_plan
from tests.attest import READS
from tests.claimed import claimed
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_FORK_OWNER, GitHubStandIn

pytestmark = pytest.mark.vllm_tree

VERSION = "0.34.0"
DELEGATE = "KimiVLForConditionalGeneration"
# The language model is the checkpoint's choice: the declaration alone, building on the
# core-eagle3-forwarding plan (its PR must merge first).
RUNTIME = "LlavaNextForConditionalGeneration"
FAMILY = "InternVLChatModel"  # the same, on a base several wrappers share
CORE_KEY = "core-eagle3-forwarding:SupportsEagle3"


@pytest.fixture(scope="module")
def _plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Verified wrapper plans: each shape that adds methods, and a family base's fix."""
    root = tmp_path_factory.mktemp("wrapper-plans")
    checkout = root / "checkout"
    git.Repo.clone_from(str(release_tree(VERSION)), str(checkout), shared=True).close()
    from bot import pipeline

    plans = {}
    for name in (DELEGATE, RUNTIME, FAMILY):
        out = root / name
        pipeline.propose(checkout, out, class_name=name, upstream=UPSTREAM)
        verified = verify_plan(out, VerifyOptions(gpu="skip", journal=False, runtime=False))
        assert verified.local_passed, verified.message
        plans[name] = out
    return plans


@pytest.fixture
def standin(
    github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> GitHubStandIn:
    tree = release_tree(VERSION)
    github_standin.add_repo(UPSTREAM, seed_from=tree)
    github_standin.add_repo(FORK, seed_from=tree)
    remotes = tmp_path / "standin" / "remotes"
    monkeypatch.setenv("BOT_FORK_URL", f"{remotes / FORK}.git")
    monkeypatch.setenv("BOT_UPSTREAM_URL", f"{remotes / UPSTREAM}.git")
    return github_standin


def _copy(plans: dict[str, Path], name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(plans[name], tmp_path / "plan"))


def _publish(plan_dir: Path, tmp_path: Path):
    return publish_plan(
        plan_dir,
        reviewer="maintainer1",
        work_dir=tmp_path / "work",
        attest=READS,
        requested_by="maintainer1",
    )


def _refused(plan_dir: Path, tmp_path: Path, standin: GitHubStandIn, match: str) -> None:
    with pytest.raises(BotError, match=match):
        _publish(plan_dir, tmp_path)
    assert standin.pulls(UPSTREAM) == []
    fork = git.Repo(standin.state.repos[FORK].git_dir)
    assert not [h for h in fork.heads if h.name.startswith("bot/")]


def _reverify(plan_dir: Path, patch: str) -> None:
    (plan_dir / "patch.diff").write_text(patch, encoding="utf-8")
    plan = read_plan_dir(plan_dir).plan
    plan.verification = claimed(plan.verification, patch_hash=patch_hash(patch))
    update_plan(plan_dir, plan)


def _diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def _file_diff(patch: str, path: str) -> str:
    start = patch.index(f"diff --git a/{path} ")
    end = patch.find("diff --git", start + 1)
    return patch[start:] if end == -1 else patch[start:end]


def _patched(path: str, own: str) -> tuple[str, str]:
    """``path`` at the base commit, and with the bot's own hunks applied by git."""
    source = git.Repo(release_tree(VERSION)).git.show(f"HEAD:{path}") + "\n"
    with tempfile.TemporaryDirectory() as scratch:
        git.Repo.init(scratch)
        target = Path(scratch) / path
        target.parent.mkdir(parents=True)
        target.write_text(source)
        (Path(scratch) / "own.diff").write_text(own)
        git.Repo(scratch).git.apply("own.diff")
        return source, target.read_text()


def _retamper(plan_dir: Path, path: str, change: Callable[[str], str]) -> None:
    """Replace ``path``'s diff in the plan's patch by one with ``change`` applied on top."""
    patch = (plan_dir / "patch.diff").read_text()
    own = _file_diff(patch, path)
    source, fixed = _patched(path, own)
    tampered = change(fixed)
    assert tampered != fixed
    _reverify(plan_dir, patch.replace(own, _diff(path, source, tampered)))


def _model_file(plan_dir: Path) -> str:
    return json.loads((plan_dir / "plan.json").read_text())["edits"][0]["path"]


def _core_pull(standin: GitHubStandIn, *, merged: bool) -> int:
    """The forwarding core's PR, as the bot opens it (its class marker), merged or open."""
    number = standin.add_pull(
        UPSTREAM,
        f"{STANDIN_FORK_OWNER}:bot/core-eagle3-forwarding/supports-eagle3",
        user=STANDIN_BOT_LOGIN,
        body=f"the core fix\n\n<!-- bot:fingerprint={CORE_KEY}:0123456789ab -->\n",
        labels=["bot:eagle3"],
    )
    if merged:
        standin.close_pull(UPSTREAM, number, merged=True)
    return number


def test_a_plan_building_on_a_core_fix_waits_until_its_pr_merged(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, RUNTIME, tmp_path)
    result = _publish(plan_dir, tmp_path)
    assert result.action == "waiting", result
    assert "core-eagle3-forwarding (SupportsEagle3: no PR yet)" in result.message
    number = _core_pull(standin, merged=False)
    result = _publish(plan_dir, tmp_path)
    assert result.action == "waiting", result
    assert f"PR #{number} is open" in result.message
    assert [p["number"] for p in standin.pulls(UPSTREAM)] == [number]  # nothing else opened
    standin.close_pull(UPSTREAM, number, merged=True)
    assert _publish(plan_dir, tmp_path).action == "opened"


@pytest.mark.parametrize("name", [DELEGATE, RUNTIME, FAMILY])
def test_a_wrapper_plan_publishes_exactly_its_patch(_plans, standin, tmp_path, name):
    plan_dir = _copy(_plans, name, tmp_path)
    core = _core_pull(standin, merged=True) if name != DELEGATE else None
    result = _publish(plan_dir, tmp_path)
    assert result.action == "opened", result
    planned = read_plan_dir(plan_dir)
    fork = git.Repo(standin.state.repos[FORK].git_dir)
    commit = fork.commit(f"refs/heads/{planned.plan.branch}")
    assert [p.hexsha for p in commit.parents] == [planned.plan.base_commit]
    pushed = fork.git.diff(commit.parents[0].hexsha, commit.hexsha, "--no-color")
    applied = tmp_path / "applied"
    git.Repo.clone_from(str(release_tree(VERSION)), str(applied), shared=True)
    git.Repo(applied).git.apply(str(plan_dir / "patch.diff"))
    git.Repo(applied).git.add("-A")  # the contributed test is a new file
    assert pushed == git.Repo(applied).git.diff("--cached", "--no-color")
    assert len([p for p in standin.pulls(UPSTREAM) if p["number"] != core]) == 1


def test_an_extra_hunk_in_an_unrelated_file_of_a_wrapper_plan_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    path = "vllm/envs.py"
    source = git.Repo(release_tree(VERSION)).git.show(f"HEAD:{path}") + "\n"
    extra = _diff(path, source, source + "import os\nos.system('id')\n")
    _reverify(plan_dir, (plan_dir / "patch.diff").read_text() + extra)
    _refused(plan_dir, tmp_path, standin, "vllm/envs.py, which the plan's edits do not")


def test_a_changed_line_in_a_delegating_method_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    forward = "        self.language_model.set_aux_hidden_state_layers(layers)\n"
    planted = forward.replace("(layers)", "(layers)\n        __import__('os').system('id')")
    _retamper(plan_dir, _model_file(plan_dir), lambda s: s.replace(forward, planted))
    _refused(
        plan_dir,
        tmp_path,
        standin,
        "not the edit the recipe makes: expected nothing, the patch has `__import__",
    )


def test_delegation_to_another_attribute_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    _retamper(
        plan_dir,
        _model_file(plan_dir),
        lambda s: s.replace(
            "self.language_model.set_aux_hidden_state_layers(layers)",
            "self.vision_tower.set_aux_hidden_state_layers(layers)",
        ),
    )
    _refused(
        plan_dir,
        tmp_path,
        standin,
        "expected `self.language_model.set_aux.*the patch has `self.vision_tower",
    )


def test_a_method_body_change_elsewhere_in_the_class_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)

    def plant(source: str) -> str:
        cls = next(
            n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == DELEGATE
        )
        first = cls.body[0]
        at = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", []))])
        lines = source.splitlines(keepends=True)
        lines.insert(at - 1, "    planted = __import__('os').system('id')\n")
        return "".join(lines)

    _retamper(plan_dir, _model_file(plan_dir), plant)
    _refused(plan_dir, tmp_path, standin, f"the change to {DELEGATE}")


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"kind": "declare-interface-and-exec"}, "publish cannot check"),
        ({"kind": "declare-interface"}, "outside the intended lines"),
    ],
)
def test_an_edit_kind_the_recipe_does_not_write_is_refused(_plans, standin, tmp_path, edit, match):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    data = json.loads((plan_dir / "plan.json").read_text())
    data["edits"][0].update(edit)
    (plan_dir / "plan.json").write_text(json.dumps(data))
    _refused(plan_dir, tmp_path, standin, match)


def _consistent_identity(data: dict) -> None:
    """Branch and fingerprint as the tampered recipe and class give them (publish re-derives
    both), so that the check under test is the one that refuses."""
    data["branch"] = branch_name(data["recipe"], data["class_name"], None)
    data["fingerprint"] = f"{data['recipe']}:{data['class_name']}:{data['base_commit'][:12]}"


def test_an_unknown_recipe_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    data = json.loads((plan_dir / "plan.json").read_text())
    data["recipe"] = "eagle3-anything"
    _consistent_identity(data)
    (plan_dir / "plan.json").write_text(json.dumps(data))
    _refused(plan_dir, tmp_path, standin, "no checks for recipe")


def test_a_class_name_other_than_the_findings_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    data = json.loads((plan_dir / "plan.json").read_text())
    data["class_name"] = "KimiVLMultiModalProjector"
    _consistent_identity(data)
    (plan_dir / "plan.json").write_text(json.dumps(data))
    _refused(plan_dir, tmp_path, standin, "not its finding's class")


def test_a_finding_in_another_file_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    data = json.loads((plan_dir / "plan.json").read_text())
    data["finding"]["path"] = "vllm/model_executor/models/llava.py"
    (plan_dir / "plan.json").write_text(json.dumps(data))
    # the forwarding test's rule (its file is checked first) finds no such finding at the base
    _refused(plan_dir, tmp_path, standin, "not one eagle3-wrapper finding at the base")


def test_a_comment_outside_the_wrappers_spans_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    _retamper(plan_dir, _model_file(plan_dir), lambda s: "# planted\n" + s)
    _refused(plan_dir, tmp_path, standin, "outside the intended lines")


def test_an_import_other_than_the_interface_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    _retamper(
        plan_dir,
        _model_file(plan_dir),
        lambda s: s.replace("\nimport torch\n", "\nimport os\nimport torch\n", 1),
    )
    _refused(plan_dir, tmp_path, standin, "the patch imports os")


def test_a_statement_after_the_wrapper_class_is_refused(_plans, standin, tmp_path):
    plan_dir = _copy(_plans, DELEGATE, tmp_path)
    last = "        return self.language_model.get_eagle3_default_aux_hidden_state_layers()\n"
    _retamper(
        plan_dir,
        _model_file(plan_dir),
        lambda s: s.replace(last, last + "\n\n__import__('os').system('id')\n", 1),
    )
    _refused(plan_dir, tmp_path, standin, "changes a statement outside the declared edit")
