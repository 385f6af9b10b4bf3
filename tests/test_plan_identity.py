"""The plan's identity (bot/github/identity.py) and the plan schema's members (bot/plan.py)."""

from __future__ import annotations

import json

import pytest

from bot.drafts import DraftEntry
from bot.errors import BotError
from bot.github import identity
from bot.plan import READY, Member, Plan
from bot.recipes.base import DeclaredEdit, Finding, FixTests
from bot.recipes.registry_plan import RegistryEntryPlan
from bot.scan.findings import scan
from bot.triage_outcome import Triage
from tests.synthetic import make_tree
from tests.test_verify_local import FOO_MODEL

BASE = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def finding(tmp_path_factory: pytest.TempPathFactory) -> Finding:
    """A real eagle3-interface finding, from a scan of a small tree."""
    root = make_tree(
        tmp_path_factory.mktemp("tree"),
        {"model_executor/models/foo.py": FOO_MODEL},
        {"_TEXT_GENERATION_MODELS": {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    [found] = [f for f in scan(root, use_cache=False).findings if f.class_name == "FooForCausalLM"]
    return found


@pytest.fixture
def schema1_plan(finding: Finding) -> dict:
    """A ready single-class plan.json as the bot wrote it before groups (no members)."""
    return {
        "status": READY,
        "reason": "FooForCausalLM lacks SupportsEagle3",
        "recipe": "eagle3-interface",
        "class_name": "FooForCausalLM",
        "base_commit": BASE,
        "issue_number": 33329,
        "finding": finding.to_json(),
        "edits": [{"path": "vllm/x.py", "kind": "declare-interface", "description": "d"}],
        "tests": {"gpu": [], "cpu": ["tests/models/test_registry.py::t[Q]"]},
        "branch": "bot/eagle3-interface/foo-for-causal-lm",
        "fingerprint": f"eagle3-interface:FooForCausalLM:{BASE[:12]}",
        "title": "Declare SupportsEagle3 on FooForCausalLM",
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


def test_schema1_plan_reads_as_a_group_of_one(schema1_plan):
    plan = Plan.from_dict(schema1_plan)
    assert not plan.is_group
    [member] = plan.members
    assert member.class_name == "FooForCausalLM"
    assert member.fingerprint == plan.fingerprint
    assert member.issues == (33329,)
    assert member.variant is None
    assert plan.member_fingerprints == [plan.fingerprint]
    # Written back and read again, it is the same plan.
    again = Plan.from_dict(json.loads(plan.to_json()))
    assert again == plan


def test_every_field_reads_as_its_record(schema1_plan, finding):
    plan = Plan.from_dict(schema1_plan)
    assert plan.finding == finding
    assert plan.edits == [DeclaredEdit("vllm/x.py", "declare-interface", "d")]
    assert plan.tests == FixTests(cpu=("tests/models/test_registry.py::t[Q]",))
    # The file a later bot writes is the file it read, key for key (schema and variant added).
    written = json.loads(plan.to_json())
    assert written["finding"] == schema1_plan["finding"]
    assert {k: written[k] for k in schema1_plan if k != "schema"} == {
        k: v for k, v in schema1_plan.items() if k != "schema"
    }
    assert (written["schema"], written["variant"]) == (3, None)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("finding", {"class": "FooForCausalLM"}, "finding: `recipe` names no recipe"),
        ("edits", [{"path": "vllm/x.py", "kind": "k"}], r"edits\[0\] lacks `description`"),
        ("tests", {"gpu": "t"}, r"tests\.gpu must be a list"),
        ("resolves", [{"recipe": "r", "class": "C"}], r"resolves\[0\] lacks `path`"),
        ("triage", {"architecture": None}, "triage lacks `method`"),
        ("registry_entry", {"key": "K"}, "registry_entry lacks `section`"),
    ],
)
def test_a_malformed_field_is_refused_on_reading(schema1_plan, field, value, error):
    with pytest.raises(BotError, match=error):
        Plan.from_dict({**schema1_plan, field: value})


@pytest.mark.parametrize("number", [0, -1, 2**31, 10**30])
def test_an_issue_number_out_of_range_is_refused_on_reading(schema1_plan, finding, number):
    with pytest.raises(BotError, match=r"`issue_number` holds -?\d+, which is not an issue number"):
        Plan.from_dict({**schema1_plan, "issue_number": number})
    member = {
        "class_name": "FooForCausalLM",
        "recipe": "eagle3-interface",
        "fingerprint": "f",
        "finding": finding.to_json(),
        "issues": [number],
    }
    group = {**schema1_plan, "group": "g", "members": [member, member]}
    with pytest.raises(BotError, match=r"members\[0\]: `issues` holds -?\d+, which is not"):
        Plan.from_dict(group)


def test_variant_read_from_an_old_fingerprint(schema1_plan):
    schema1_plan["fingerprint"] = f"eagle3-interface:FooForCausalLM@amd:{BASE[:12]}"
    assert Plan.from_dict(schema1_plan).members[0].variant == "amd"
    # From schema 3 on, the plan says its variant; the fingerprint is never read for it.
    schema1_plan.update(schema=3, variant=None)
    assert Plan.from_dict(schema1_plan).members[0].variant is None


def test_group_plan_round_trips_and_lists_every_issue(finding):
    members = [
        Member(
            class_name="A",
            recipe="eagle3-interface",
            fingerprint="eagle3-interface:A:1",
            finding=finding,
        ),
        Member(
            class_name="B",
            recipe="eagle3-interface",
            fingerprint="eagle3-interface:B:1",
            finding=finding,
            issues=(7, 9),
        ),
    ]
    plan = Plan(status=READY, reason="r", recipe="eagle3-interface", group="g", members=members)
    assert plan.is_group and plan.issues == [7, 9]
    assert Plan.from_dict(json.loads(plan.to_json())) == plan


@pytest.mark.parametrize(
    ("members", "error"),
    [
        ("no", "members must be a list"),
        (["no"], r"members\[0\] must be an object"),
        ([{"class_name": "A", "recipe": "r", "fingerprint": "f", "x": 1}], "unknown fields: x"),
        (
            [{"class_name": "A", "recipe": "r", "fingerprint": 3, "finding": {}}],
            "fingerprint must be str",
        ),
        ([{"class_name": "A", "recipe": "r", "fingerprint": "f"}], "lacks `finding`"),
        ([{"class_name": "A", "recipe": "r", "fingerprint": "f", "finding": "F"}], "finding"),
    ],
)
def test_malformed_members_are_refused(schema1_plan, members, error):
    with pytest.raises(BotError, match=error):
        Plan.from_dict({**schema1_plan, "members": members})


def test_a_malformed_members_issue_is_refused(schema1_plan, finding):
    member = {"class_name": "A", "recipe": "r", "fingerprint": "f", "finding": finding.to_json()}
    with pytest.raises(BotError, match=r"members\[0\]\.issues\[0\] must be int"):
        Plan.from_dict({**schema1_plan, "members": [{**member, "issues": ["1"]}]})


def test_a_single_class_plans_member_is_always_its_own_fields(schema1_plan, finding):
    schema1_plan["members"] = [
        {
            "class_name": "Mallory",
            "recipe": "eagle3-interface",
            "fingerprint": "x:Mallory:1",
            "finding": finding.to_json(),
        }
    ]
    [member] = Plan.from_dict(schema1_plan).members
    assert member.class_name == "FooForCausalLM"


def test_a_registry_entry_reads_back_and_its_derived_keys_must_agree():
    draft = DraftEntry("some-org/Foo-eagle3", "eagle3", "org/Foo", "FooForCausalLM", "test")
    entry = RegistryEntryPlan(
        key="Eagle3FooDraftModel",
        section="Eagle",
        args=("org/Foo",),
        kwargs=(("speculative_model", "some-org/Foo-eagle3"), ("max_model_len", 1024)),
        draft=draft,
        sibling=None,
        why="w",
    )
    data = json.loads(json.dumps(entry.to_json()))
    assert data["gpu_test"] == entry.gpu_test and data["kwargs"][0] == [
        "speculative_model",
        "some-org/Foo-eagle3",
    ]
    assert RegistryEntryPlan.from_json(data, "entry") == entry
    for key in ("gpu_test", "file", "dict"):
        with pytest.raises(BotError, match=f"entry: `{key}` is not the one its key gives"):
            RegistryEntryPlan.from_json({**data, key: "tests/other.py::t"}, "entry")
    with pytest.raises(BotError, match=r"entry\.kwargs\[1\] must be a list of 2"):
        RegistryEntryPlan.from_json({**data, "kwargs": [data["kwargs"][0], ["x"]]}, "entry")


def test_a_triage_reads_back_and_its_confidence_and_outcome_are_checked():
    triage = Triage("FooForCausalLM", "eagle3", ("Foo",), None, 0.9, ("r",), None, ())
    data = json.loads(json.dumps(triage.to_json()))
    assert data["confident"] is True and Triage.from_json(data, "triage") == triage
    with pytest.raises(BotError, match="`confident` is not what its confidence gives"):
        Triage.from_json({**data, "confident": False}, "triage")
    with pytest.raises(BotError, match="`outcome` is not one of"):
        Triage.from_json({**data, "outcome": "publish"}, "triage")
