"""The plan's identity (bot/github/identity.py) and the plan schema's members (bot/plan.py)."""

from __future__ import annotations

import json

import pytest

from bot.errors import BotError
from bot.github import identity
from bot.plan import READY, Member, Plan

BASE = "0123456789abcdef0123456789abcdef01234567"


def _schema1_plan() -> dict:
    """A ready single-class plan.json as the bot wrote it before groups (no members)."""
    return {
        "status": READY,
        "reason": "Qwen3NextForCausalLM lacks SupportsEagle3",
        "recipe": "eagle3-interface",
        "class_name": "Qwen3NextForCausalLM",
        "base_commit": BASE,
        "issue_number": 33329,
        "finding": {"class": "Qwen3NextForCausalLM", "path": "vllm/x.py"},
        "edits": [{"path": "vllm/x.py", "kind": "declare-interface", "description": "d"}],
        "tests": {"gpu": [], "cpu": ["tests/models/test_registry.py::t[Q]"]},
        "branch": "bot/eagle3-interface/qwen3-next-for-causal-lm",
        "fingerprint": f"eagle3-interface:Qwen3NextForCausalLM:{BASE[:12]}",
        "title": "Declare SupportsEagle3 on Qwen3NextForCausalLM",
        "schema": 1,
    }


def test_fingerprint_and_branch_as_published_before():
    assert (
        identity.fingerprint("eagle3-interface", "KimiLinearForCausalLM", "amd", BASE)
        == f"eagle3-interface:KimiLinearForCausalLM@amd:{BASE[:12]}"
    )
    assert (
        identity.branch_name("eagle3-interface", "Qwen3NextForCausalLM", None)
        == "bot/eagle3-interface/qwen3-next-for-causal-lm"
    )


def test_group_identity_depends_on_its_members():
    one = identity.group_fingerprint("eagle3-interface/interface-only", ["a:X:1", "a:Y:1"], BASE)
    same = identity.group_fingerprint("eagle3-interface/interface-only", ["a:Y:1", "a:X:1"], BASE)
    other = identity.group_fingerprint("eagle3-interface/interface-only", ["a:X:1"], BASE)
    assert one == same != other
    assert identity.is_group_fingerprint(one)
    assert identity.FINGERPRINT.match(one)
    branch = identity.group_branch_name("interface-only", ["a:X:1"])
    assert identity.BOT_BRANCH.match(branch)


def test_a_fix_keeps_its_identity_when_the_upstream_moves():
    """The same fix planned on another base commit: another fingerprint, the same fix key
    (and for a group the same branch); another class or member set is another fix."""
    moved = "f" * 40
    one = identity.fingerprint("eagle3-interface", "FooForCausalLM", "amd", BASE)
    later = identity.fingerprint("eagle3-interface", "FooForCausalLM", "amd", moved)
    assert one != later and identity.fix_key(one) == identity.fix_key(later)
    assert identity.fix_key(one) == "eagle3-interface:FooForCausalLM@amd"
    other = identity.fingerprint("eagle3-interface", "FooForCausalLM", None, BASE)
    assert identity.fix_key(other) != identity.fix_key(one)

    members = [one, identity.fingerprint("eagle3-interface", "BarForCausalLM", None, BASE)]
    moved_members = [later, identity.fingerprint("eagle3-interface", "BarForCausalLM", None, moved)]
    group = identity.group_fingerprint("interface-only", members, BASE)
    regrouped = identity.group_fingerprint("interface-only", moved_members, moved)
    assert group != regrouped and identity.fix_key(group) == identity.fix_key(regrouped)
    assert identity.group_branch_name("interface-only", members) == identity.group_branch_name(
        "interface-only", moved_members
    )
    assert identity.is_group_of(regrouped, "interface-only")
    assert not identity.is_group_of(regrouped, "wrapper-runtime")
    assert not identity.is_group_of(later, "interface-only")
    fewer = identity.group_fingerprint("interface-only", moved_members[:1], moved)
    assert identity.fix_key(fewer) != identity.fix_key(group)
    assert identity.fix_key("not a fingerprint") is None


def test_markers_written_and_parsed_in_one_place():
    group = identity.group_fingerprint("g", ["r:A:1", "r:B:1"], BASE)
    lines = identity.identity_markers(group, ["r:A:1", "r:B:1"])
    body = "text\n" + "\n".join(lines) + "\n" + identity.body_sha_marker("abc123") + "\n"
    assert identity.plan_fingerprint_in(body) == group
    assert identity.fingerprints_in(body) == {group, "r:A:1", "r:B:1"}
    assert identity.body_sha_in(body) == "abc123"
    assert all(identity.is_identity_line(line) for line in lines)
    # A group of one carries just its fingerprint, as single-class PRs always have.
    assert identity.identity_markers("r:A:1", ["r:A:1"]) == ["<!-- bot:fingerprint=r:A:1 -->"]
    # The older hand-written form with a colon is still read.
    assert identity.plan_fingerprint_in("<!-- bot:fingerprint: r:A:1 -->") == "r:A:1"
    ticked = f"- [x] T {identity.approve_marker(group, 'sha256:ff')}\n- [ ] U "
    ticked += identity.approve_marker("r:C:1", "sha256:00")
    assert identity.ticked_approvals(ticked) == {(group, "sha256:ff")}


def test_schema1_plan_reads_as_a_group_of_one():
    plan = Plan.from_dict(_schema1_plan())
    assert not plan.is_group
    [member] = plan.members
    assert member.class_name == "Qwen3NextForCausalLM"
    assert member.fingerprint == plan.fingerprint
    assert member.issues == [33329]
    assert member.variant is None
    assert plan.member_fingerprints == [plan.fingerprint]
    # Written back and read again, it is the same plan.
    again = Plan.from_dict(json.loads(plan.to_json()))
    assert again == plan


def test_variant_read_from_an_old_fingerprint():
    data = _schema1_plan()
    data["fingerprint"] = f"eagle3-interface:KimiLinearForCausalLM@amd:{BASE[:12]}"
    assert Plan.from_dict(data).members[0].variant == "amd"


def test_group_plan_round_trips_and_lists_every_issue():
    members = [
        Member(class_name="A", recipe="eagle3-interface", fingerprint="eagle3-interface:A:1"),
        Member(
            class_name="B",
            recipe="eagle3-interface",
            fingerprint="eagle3-interface:B:1",
            issues=[7, 9],
        ),
    ]
    plan = Plan(status=READY, reason="r", recipe="eagle3-interface", group="g", members=members)
    assert plan.is_group and plan.issues == [7, 9]
    assert Plan.from_dict(json.loads(plan.to_json())) == plan


@pytest.mark.parametrize(
    ("members", "error"),
    [
        ("no", "`members` must be a list"),
        (["no"], "each of `members` must be an object"),
        ([{"class_name": "A", "recipe": "r", "fingerprint": "f", "x": 1}], "unknown fields: x"),
        ([{"class_name": "A", "recipe": "r", "fingerprint": 3}], "`fingerprint` must be str"),
        ([{"class_name": "A", "recipe": "r", "fingerprint": "f", "issues": ["1"]}], "issues"),
    ],
)
def test_malformed_members_are_refused(members, error):
    data = {**_schema1_plan(), "members": members}
    with pytest.raises(BotError, match=error):
        Plan.from_dict(data)


def test_a_single_class_plans_member_is_always_its_own_fields():
    data = _schema1_plan()
    data["members"] = [
        {"class_name": "Mallory", "recipe": "eagle3-interface", "fingerprint": "x:Mallory:1"}
    ]
    [member] = Plan.from_dict(data).members
    assert member.class_name == "Qwen3NextForCausalLM"
