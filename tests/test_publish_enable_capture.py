"""`bot publish` takes an eagle3-enable plan's aux capture from the base tree, never the plan.

How the decoder captures the aux hidden states is decided by the recipe from the tree: the
residual passed (the stream's name or ``None``, from the residual semantics), counting from
``self.start_layer`` or from ``0`` (the tree's enabled decoders), and a loop over every layer
sliced to this stage or not: four forms of the capture codemod, each with or without the
residual. A compromised unprivileged job can rewrite the patch to any other of them and record
the variant it chose in plan.json (and a patch hash, and a smoke claim); publish must refuse
each one, with one line, pushing nothing.

The plans are the bot's own (`bot propose --class` on a clone of vLLM 0.34.0), one for each
residual semantics a ready plan has there; the upstream and the fork on the GitHub stand-in
are seeded from the same tree.
"""

from __future__ import annotations

import ast
import itertools
import json
import shutil
from pathlib import Path

import git
import pytest

from bot.codemods.aux_capture import add_aux_capture
from bot.codemods.base import CodemodRefused
from bot.codemods.bases import append_base_class
from bot.content_hash import patch_hash
from bot.errors import BotError
from bot.plan import read_plan_dir, update_plan
from bot.publish.pr import publish_plan
from bot.tree.fetch import release_tree
from tests.attest import READS
from tests.claimed import claimed
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import GitHubStandIn
from tests.test_publish_wrapper import VERSION, _diff, _file_diff, _patched, standin

pytestmark = pytest.mark.vllm_tree

__all__ = ["standin"]  # the stand-in fixture, seeded from the same release

# One ready plan per residual semantics on 0.34.0 (explicit-add's, HYV3, writes the same
# forward test as residual-stream; tests/test_contributed_tests.py checks publish derives it).
TARGETS = {
    "residual-stream": "Gemma2ForCausalLM",
    "no-residual": "OrionForCausalLM",
    "full-stream-pair": "GraniteMoeHybridForCausalLM",  # a loop over every layer: sliced
}
MIXIN = "EagleModelMixin"
CLAIMED_CHECKS = [
    {"name": "smoke", "passed": True, "detail": "claimed", "record": {"values_proven": True}},
    {"name": "engine", "passed": True, "detail": "claimed"},
]


@pytest.fixture(scope="module")
def _plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bot's own ready plans, their verification claimed as a compromised verify job
    would (the smoke evidence is not what this file is about)."""
    from bot import pipeline

    root = tmp_path_factory.mktemp("enable-plans")
    checkout = root / "checkout"
    git.Repo.clone_from(str(release_tree(VERSION)), str(checkout), shared=True).close()
    plans = {}
    for kind, name in TARGETS.items():
        out = root / name
        pipeline.propose(checkout, out, class_name=name, upstream=UPSTREAM)
        plan = read_plan_dir(out).plan
        assert plan.status == "ready", plan.reason
        assert plan.finding["evidence"]["shape"]["residual"] == kind
        _claim_verified(out, (out / "patch.diff").read_text())
        plans[kind] = out
    return plans


def _claim_verified(plan_dir: Path, patch: str, residual_name: object = ...) -> None:
    (plan_dir / "patch.diff").write_text(patch, encoding="utf-8")
    plan = read_plan_dir(plan_dir).plan
    plan.verification = claimed(None, patch_hash=patch_hash(patch), checks=CLAIMED_CHECKS)
    if residual_name is not ...:
        plan.finding["evidence"]["shape"]["residual_name"] = residual_name
    update_plan(plan_dir, plan)


def _decoder_edit(plan_dir: Path) -> tuple[str, str]:
    """The model file the enable edit changes, and the decoder class it names."""
    data = json.loads((plan_dir / "plan.json").read_text())
    (path,) = [e["path"] for e in data["edits"] if e["kind"].startswith("enable-decoder")]
    return path, data["finding"]["evidence"]["decoder"]["name"]


def _class_node(text: str, name: str) -> ast.ClassDef:
    (node,) = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == name]
    return node


def _with_capture(base: str, patched: str, decoder: str, variant: tuple) -> str | None:
    """``patched`` with the decoder class as the capture codemod writes ``variant`` (residual,
    absolute, stage_slice) on the base; None where the codemod refuses that form here."""
    residual, absolute, stage_slice = variant
    try:
        written = add_aux_capture(
            append_base_class(base, decoder, MIXIN), decoder, residual, absolute, stage_slice
        )
    except CodemodRefused:
        return None
    new, old = _class_node(written, decoder), _class_node(patched, decoder)
    lines = patched.splitlines(keepends=True)
    lines[old.lineno - 1 : old.end_lineno] = written.splitlines(keepends=True)[
        new.lineno - 1 : new.end_lineno
    ]
    return "".join(lines)


def _tampered_variants(plan_dir: Path) -> list[tuple[tuple, str, str, str]]:
    """Every capture form the codemod can write on this decoder other than the recipe's:
    (variant, model file, its base text, the tampered text)."""
    path, decoder = _decoder_edit(plan_dir)
    own = _file_diff((plan_dir / "patch.diff").read_text(), path)
    base, patched = _patched(path, own)
    genuine = ast.dump(_class_node(patched, decoder))
    found = []
    for variant in itertools.product((None, "residual"), (True, False), (False, True)):
        tampered = _with_capture(base, patched, decoder, variant)
        if tampered is not None and ast.dump(_class_node(tampered, decoder)) != genuine:
            found.append((variant, path, base, tampered))
    return found


def _nothing_pushed(standin: GitHubStandIn) -> None:
    assert standin.pulls(UPSTREAM) == []
    fork = git.Repo(standin.state.repos[FORK].git_dir)
    assert not [h for h in fork.heads if h.name.startswith("bot/")]


@pytest.mark.parametrize("kind", TARGETS)
def test_the_recipes_own_capture_is_published(_plans, standin, tmp_path, kind):
    """The baseline: the untampered plan (same claimed evidence) opens its PR, a draft: the
    claimed smoke evidence buys no more until GitHub confirms a GPU run."""
    plan_dir = Path(shutil.copytree(_plans[kind], tmp_path / "plan"))
    result = publish_plan(
        plan_dir,
        reviewer="maintainer1",
        work_dir=tmp_path / "work",
        attest=READS,
        requested_by="maintainer1",
    )
    assert result.action == "opened", result
    (pull,) = standin.pulls(UPSTREAM)
    assert pull["draft"] is True


@pytest.mark.parametrize("kind", TARGETS)
def test_a_capture_variant_the_recipe_did_not_choose_is_refused(_plans, standin, tmp_path, kind):
    """Each other form, with plan.json's recorded residual name set to match it (what the
    publish rule once believed) and its hash recorded as verified: refused, one line."""
    variants = _tampered_variants(_plans[kind])
    forms = {(absolute, stage_slice) for (_, absolute, stage_slice), *_ in variants}
    assert len(variants) >= 3 and len(forms) >= 2, variants  # the tamper set is not empty
    for variant, path, base, tampered in variants:
        plan_dir = Path(shutil.copytree(_plans[kind], tmp_path / f"plan-{variant}"))
        patch = (plan_dir / "patch.diff").read_text()
        patch = patch.replace(_file_diff(patch, path), _diff(path, base, tampered))
        _claim_verified(plan_dir, patch, residual_name=variant[0])
        try:
            result = publish_plan(
                plan_dir,
                reviewer="maintainer1",
                work_dir=tmp_path / "work",
                attest=READS,
                requested_by="maintainer1",
            )
        except BotError as refused:
            message = str(refused)
        else:
            pytest.fail(f"published the capture {variant} (residual, absolute, slice): {result}")
        assert "\n" not in message and path in message, (variant, message)
        assert "not the mixin and the aux capture the recipe writes" in message, variant
        _nothing_pushed(standin)


def test_the_four_capture_forms_are_all_in_the_tamper_set(_plans):
    """Counting from self.start_layer or 0, sliced to the stage or not: across the plans,
    each form is one the recipe did not choose for some plan (so each is tried above)."""
    tried = {
        (absolute, stage_slice)
        for plan_dir in _plans.values()
        for (_, absolute, stage_slice), *_ in _tampered_variants(plan_dir)
    }
    assert tried == set(itertools.product((True, False), (False, True)))


def test_a_plan_without_its_contributed_forward_test_is_refused(_plans, standin, tmp_path):
    """The test file and its edit both dropped, the rest (and its claimed hash) consistent."""
    plan_dir = Path(shutil.copytree(_plans["residual-stream"], tmp_path / "plan"))
    plan = read_plan_dir(plan_dir).plan
    # (0.34.0 has tests/AGENTS.md: the contributed test is the one through LLM)
    (test_path,) = [e["path"] for e in plan.edits if e["kind"] == "llm-test"]
    plan.edits = [e for e in plan.edits if e["kind"] != "llm-test"]
    update_plan(plan_dir, plan)
    patch = (plan_dir / "patch.diff").read_text()
    _claim_verified(plan_dir, patch.replace(_file_diff(patch, test_path), ""))
    with pytest.raises(BotError, match="no aux-forward-test or llm-test edit") as refused:
        publish_plan(
            plan_dir,
            reviewer="maintainer1",
            work_dir=tmp_path / "work",
            attest=READS,
            requested_by="maintainer1",
        )
    assert "\n" not in str(refused.value)
    _nothing_pushed(standin)
