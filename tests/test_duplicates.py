"""The duplicate-work search AGENTS.md asks for (class names and short area keywords over the
titles and bodies of open and merged PRs), and what it does to a group: a member another PR
covers leaves the group, named with that PR, and the rest go on. Also what else bounds a group:
the pr-checklist skill's tiers, and how `--groups` counts.

Real PyGithub against the GitHub stand-in; the groups are synthetic trees of interface gaps
(seconds to plan and check), published to a bare fork like the real ones.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bot import pipeline
from bot.errors import BotError
from bot.github.client import GitHubClient
from bot.journal.store import Journal, TriagedIssue
from bot.plan import READY, Plan, read_plan_dir
from bot.propose.group import lines_outside_tests
from bot.publish.duplicates import keywords_of, names, run_search, tokens
from bot.publish.pr import publish_plan
from bot.recipes.cases import SyntheticTree
from bot.recipes.eagle3_interface import cases as interface_cases
from bot.recipes.grouping import INTERFACE_ONLY
from bot.tree.fetch import release_tree
from bot.verify import VerifyOptions, verify_plan
from tests.attest import READS
from tests.cli import run_bot
from tests.conftest import FORK, UPSTREAM
from tests.test_recipe_cases import build

QWEN2_MOE = keywords_of("Qwen2MoeForCausalLM", "vllm/model_executor/models/qwen2_moe.py")
GLM4 = keywords_of("Glm4ForCausalLM", "vllm/model_executor/models/glm4.py", [41])


def test_keywords_are_the_class_its_family_and_its_file():
    assert (QWEN2_MOE.family, QWEN2_MOE.file) == ("Qwen2Moe", "qwen2_moe")
    step5 = keywords_of("Step5ForCausalLM", "vllm/models/step5/nvidia/model.py")
    assert step5.file == "step5"  # a model package names the model, not its platform file
    # One whole name, however it is spelled, and not the start of a longer version.
    wanted = tokens("Qwen2Moe")
    for spelled in ("Qwen2-MoE", "qwen2_moe.py", "Qwen2 MoE", "Qwen2MoE", "QWEN2-MOE"):
        assert names(tokens(f"Add EAGLE-3 for {spelled} now"), wanted), spelled
    assert not names(tokens("EAGLE-3 for Qwen2.5-MoE"), wanted)
    assert not names(tokens("EAGLE-3 for GLM-4.5"), tokens("Glm4"))
    assert names(tokens("EAGLE-3 for GLM-4"), tokens("Glm4"))


def test_a_family_named_pr_is_found_and_only_a_covering_one_is_a_duplicate(github_standin):
    standin = github_standin
    standin.add_repo(UPSTREAM)
    standin.add_issue(UPSTREAM, 41, "GLM-4 with EAGLE-3 fails", "Glm4ForCausalLM refuses")
    family = standin.add_pull(
        UPSTREAM,
        "someone:qwen",
        user="someone",
        title="Add EAGLE-3 support for Qwen2-MoE",
    )
    newer = standin.add_pull(
        UPSTREAM, "someone:glm45", user="someone", title="[Spec Decode] EAGLE-3 for GLM-4.5"
    )
    in_passing = standin.add_pull(
        UPSTREAM,
        "someone:generic",
        user="someone",
        title="[Spec Decode] Faster EAGLE-3 drafting",
        body="Tested on Llama and Qwen2-MoE.",
    )
    refused = standin.add_pull(
        UPSTREAM, "someone:glm4", user="someone", title="EAGLE3 for Glm4ForCausalLM"
    )
    standin.close_pull(UPSTREAM, refused)  # closed unmerged: a no, not a duplicate
    unrelated = standin.add_pull(
        UPSTREAM, "someone:rope", user="someone", title="Glm4ForCausalLM: fix rope scaling"
    )
    naming_issue = standin.add_pull(
        UPSTREAM, "someone:fix41", user="someone", title="[Bugfix] GLM", body="Fixes #41"
    )

    search = run_search(GitHubClient(), UPSTREAM, [QWEN2_MOE, GLM4], [], ())

    assert search.ran and search.covering("Qwen2MoeForCausalLM").number == family
    assert search.covering("Qwen2MoeForCausalLM").why == (
        "its title names the model family Qwen2Moe (Qwen2MoeForCausalLM)"
    )
    assert search.covering("Glm4ForCausalLM").number == naming_issue
    found = {f.number: f for f in search.found}
    assert found[refused].state == "closed" and found[refused].covers == ("Glm4ForCausalLM",)
    for number in (newer, in_passing, unrelated):
        assert number not in found  # names neither class: not listed, not a duplicate
    # The commands AGENTS.md names, filled in (every state: a merged PR is a duplicate too).
    assert search.commands[0] == "gh issue view 41 --repo vllm-project/vllm --comments"
    assert '--state all --search "41 in:body"' in search.commands[1]
    assert '--search "eagle OR eagle3 OR dflash OR dspark OR SupportsEagle3"' in search.commands[2]


def _three_gaps() -> SyntheticTree:
    foo = interface_cases.GAP.tree
    files, registry = dict(foo.files), {d: dict(e) for d, e in foo.registry.items()}
    for name in ("Bar", "Baz"):
        low = name.lower()
        files.update({p.replace("foo", low): t.replace("Foo", name) for p, t in foo.files.items()})
        for entries in registry.values():
            entries[f"{name}ForCausalLM"] = (low, f"{name}ForCausalLM")
    return SyntheticTree(files, registry)


@pytest.fixture
def three_gaps(tmp_path: Path, github_standin, monkeypatch) -> Path:
    """A tree of three interface gaps (one group), the stand-in's upstream and fork seeded from
    it, and an open issue asking for Foo (demand)."""
    root = build(_three_gaps(), tmp_path / "tree")
    github_standin.add_repo(UPSTREAM, seed_from=root)
    github_standin.add_repo(FORK, seed_from=root)
    github_standin.add_issue(UPSTREAM, 7, "Foo fails with EAGLE-3", "FooForCausalLM refuses")
    remotes = tmp_path / "standin" / "remotes"
    monkeypatch.setenv("BOT_FORK_URL", f"{remotes / FORK}.git")
    monkeypatch.setenv("BOT_UPSTREAM_URL", f"{remotes / UPSTREAM}.git")
    Journal().record_triaged_issue(TriagedIssue(7, "Foo", "u", "open", "FooForCausalLM"))
    return root


def _group(root: Path, out: Path) -> tuple[Plan, list[str]]:
    ranked, groups = pipeline.find_groups(root)
    plan, left_out = pipeline.propose_group(
        root, out, INTERFACE_ONLY, ranked=ranked, groups=groups, upstream=UPSTREAM
    )
    return plan, left_out


def test_a_group_with_one_covered_member_publishes_the_rest_and_names_the_pr(
    three_gaps, github_standin, tmp_path
):
    covering = github_standin.add_pull(
        UPSTREAM, "someone:bar", user="someone", title="[Model] EAGLE-3 for Bar (bar.py)"
    )
    plan, left_out = _group(three_gaps, tmp_path / "plan")
    assert plan.status == READY
    assert {m.class_name for m in plan.members} == {"BazForCausalLM", "FooForCausalLM"}
    [line] = left_out
    assert line.startswith(f"BarForCausalLM: covered by PR #{covering} (open)")
    options = VerifyOptions(gpu="skip", journal=False, runtime=False)
    assert verify_plan(tmp_path / "plan", options).local_passed

    result = publish_plan(tmp_path / "plan", reviewer=None, work_dir=tmp_path / "w", attest=READS)

    assert result.action == "opened", result
    pull = next(p for p in github_standin.pulls(UPSTREAM) if p["number"] == result.pr_number)
    assert (
        f"- `BarForCausalLM: covered by PR #{covering} (open): [Model] EAGLE-3 for Bar"
        in (pull["body"])
    )
    assert "No open or merged PR covers any of the 2 classes here." in pull["body"]
    assert "bot:member=eagle3-interface:BarForCausalLM" not in pull["body"]


def test_a_member_covered_after_the_plan_was_made_fails_closed_naming_both(
    three_gaps, github_standin, tmp_path
):
    plan, left_out = _group(three_gaps, tmp_path / "plan")
    assert left_out == [] and len(plan.members) == 3
    options = VerifyOptions(gpu="skip", journal=False, runtime=False)
    assert verify_plan(tmp_path / "plan", options).local_passed
    merged = github_standin.add_pull(
        UPSTREAM, "someone:baz", user="someone", title="Support EAGLE3 in Baz"
    )
    github_standin.close_pull(UPSTREAM, merged, merged=True)
    writes = len(github_standin.writes())
    with pytest.raises(BotError) as refused:
        publish_plan(tmp_path / "plan", reviewer=None, work_dir=tmp_path / "w", attest=READS)
    assert f"BazForCausalLM is covered by PR #{merged} (merged" in str(refused.value)
    assert "bot propose --group interface-only" in str(refused.value)
    assert len(github_standin.writes()) == writes and len(github_standin.pulls(UPSTREAM)) == 1


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_offline_group_dry_run_records_the_search_as_not_run(tmp_path, monkeypatch):
    root = build(_three_gaps(), tmp_path / "tree")
    monkeypatch.setenv("GITHUB_API_URL", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("BOT_GITHUB_BACKOFF", "10")
    monkeypatch.setenv("BOT_GITHUB_MAX_WAIT", "5")
    out = tmp_path / "plan"
    done = run_bot(
        "propose", "--group", INTERFACE_ONLY, "--repo", str(root), "--dry-run", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    planned = read_plan_dir(out)
    search = planned.plan.duplicate_search
    assert planned.plan.status == READY and len(planned.plan.members) == 3
    assert search is not None and not search.ran and "GitHub is unreachable" in search.why_not
    assert "**Why this is not a duplicate:** not searched yet (offline:" in planned.pr_body


def test_groups_count_every_target_a_shared_decoder_plan_fixes():
    done = run_bot("scan", str(release_tree("0.34.0")), "--groups")
    assert done.returncode == 0, done.stderr
    assert (
        "eagle3-enable-PanguEmbeddedForCausalLM (3): PanguEmbeddedForCausalLM (with "
        "PanguProMoEV2ForCausalLM, PanguUltraMoEForCausalLM)"
    ) in done.stdout
    assert "interface-only (22): " in done.stdout
    # Each group says whether bot publish would find demand for it, and the total says so too.
    *groups, total = done.stdout.strip().splitlines()
    waiting = sum(line.endswith(" -- no demand yet") for line in groups)
    assert total == (
        f"{len(groups)} groups: {len(groups) - waiting} with demand (a triaged issue or a public "
        f"draft) would open a PR; {waiting} wait on the dashboard issue for a maintainer's request"
    )


SKILL = """### 1. Design Fit

#### 1.3: Complexity

- Low complexity: < 2 lines. Easy.
- Medium complexity: 2-4 lines. Careful.
- High complexity: > 4 lines. Thorough.
"""


def test_a_group_stays_within_the_skills_medium_tier(tmp_path):
    """The tree's pr-checklist skill sets the tiers (here a tiny one: Medium is 2-4 lines
    added outside tests); a member that would take the group past Medium waits for a later
    group, with that said, and the rest form the plan."""
    gaps = _three_gaps()
    skill = {".agents/skills/pr-checklist/SKILL.md": SKILL}
    root = build(SyntheticTree({**gaps.files, **skill}, gaps.registry), tmp_path / "tree")
    ranked, groups = pipeline.find_groups(root)
    plan, left_out = pipeline.propose_group(
        root, tmp_path / "plan", INTERFACE_ONLY, ranked=ranked, groups=groups, dedupe=False
    )
    assert plan.status == READY and len(plan.members) == 2
    [line] = left_out
    assert line.endswith(
        "left for a later group: with it the group would add 6 lines outside tests, past the "
        "pr-checklist skill's Medium complexity tier (up to 4); propose the group again once "
        "this PR is published"
    )
    assert lines_outside_tests(read_plan_dir(tmp_path / "plan").patch) == 4
