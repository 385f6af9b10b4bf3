"""The contributed test for a tree with ``tests/AGENTS.md``: through ``LLM``, selected by a CI step.

Shared by the fixing recipes. A tree without ``tests/AGENTS.md`` keeps its own conventions
(the recipes' CPU tests built the way the release's own tests are); one with it gets
:mod:`bot.codemods.llm_target_test`'s file, extended by each fixed target, instead of any test
on stand-ins. Placement is read from the tree: the file goes where a per-pull-request step of
``.buildkite/test_areas/*.yaml`` runs it (:mod:`bot.tree.ci_steps`); where that step's
``source_file_dependencies`` do not cover a changed model file, the step gains the path (its
own edit, :mod:`bot.codemods.ci_step_dependency`). Publish derives all of it again from the
base commit (:func:`expected_targets`, :func:`placement`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.recipes.base import (
    Declined,
    FileEdit,
    Finding,
    PublishedEdit,
    PublishRule,
    platform_variant,
    step,
)
from bot.tree.layout import AGENTS_RULES, INTERFACES_PATH, TEST_AREAS, TEST_REGISTRY_PATH

if TYPE_CHECKING:
    from bot.tree.ci_steps import CiStep

# (codemods, publish checks and the YAML reader are imported where used: `bot scan` imports
# every recipe, and this module with them.)

LLM_TEST_KIND = "llm-test"
CI_STEP_KIND = "ci-step-dependency"
# A target's test depends on its example model: these entries cannot run as written.
_UNRUNNABLE = ("is_available_online",)


def follows_agents_rules(root: Path) -> bool:
    """Whether the tree asks for tests in ``tests/AGENTS.md``'s style."""
    return (root / AGENTS_RULES).is_file()


# What the test through LLM uses from a tree: each file, the text that shows it there, and
# what that is.
_LLM_TEST_NEEDS = (
    ("tests/conftest.py", "def vllm_runner", "the vllm_runner fixture"),
    (TEST_REGISTRY_PATH, "def check_transformers_version", "the example models' checks"),
    ("tests/models/utils.py", "def dummy_hf_overrides", "dummy_hf_overrides"),
    ("vllm/config/speculative.py", '"extract_hidden_states"', "the extract_hidden_states method"),
    (INTERFACES_PATH, "class EagleModelMixin", "EagleModelMixin"),
    ("vllm/entrypoints/llm.py", "def apply_model", "LLM.apply_model"),
)


def llm_test_unavailable(root: Path) -> str | None:
    """Why the test through LLM cannot be contributed to this tree, or None when it can: the
    tree has what it uses and a per-pull-request CI step runs its file. On a tree without
    ``tests/AGENTS.md`` it is the test where the tree's own style (a stand-in forward test)
    cannot be written: a decoder is never refused for want of a generated test alone."""
    for path, text, what in _LLM_TEST_NEEDS:
        try:
            found = text in (root / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            found = False
        if not found:
            return f"{path} does not have {what}, which the test through LLM uses"
    where = placement(root, [])
    return where.reason.removeprefix("needs a human: ") if isinstance(where, Declined) else None


def example_arch(root: Path, archs: Sequence[str]) -> str | Declined:
    """The first of ``archs`` with an example model in ``tests/models/registry.py`` that is
    available online (the test builds that model's config through ``LLM``)."""
    from bot.tree.known_models import GENERATION_CATEGORIES, load_known_models

    known = load_known_models(root)
    for arch in archs:
        entries = [e for e in known.entries(arch) if e.category in GENERATION_CATEGORIES]
        if entries and all(entries[0].kwargs.get(k, True) is not False for k in _UNRUNNABLE):
            return arch
    listed = ", ".join(archs) or "no architecture"
    return Declined(
        f"needs a human: {listed} has no example model available online in "
        f"{TEST_REGISTRY_PATH}, which the LLM test builds"
    )


@dataclass(frozen=True)
class Placement:
    step: CiStep
    uncovered: tuple[str, ...]  # changed files the step's dependencies do not cover


def placement(root: Path, changed: Sequence[str]) -> Placement | Declined:
    """The per-pull-request CI step that runs the LLM test file, and the changed files it
    would not run for. Preferred: a step whose dependencies already cover them all."""
    from bot.codemods.llm_target_test import LLM_TEST_FUNCTION, LLM_TEST_PATH
    from bot.tree.ci_steps import selecting_steps

    if not (root / LLM_TEST_PATH).parent.is_dir():
        return Declined(f"needs a human: {Path(LLM_TEST_PATH).parent}/ is not in this tree")
    steps = [s for s in selecting_steps(root, LLM_TEST_PATH, LLM_TEST_FUNCTION) if s.key]
    if not steps:
        return Declined(
            f"needs a human: no per-pull-request step of {TEST_AREAS}/ runs {LLM_TEST_PATH}"
        )

    def uncovered(s: CiStep) -> tuple[str, ...]:
        return tuple(p for p in changed if not s.covers(p))

    best = min(steps, key=lambda s: (len(uncovered(s)), s.file, s.label))
    return Placement(best, uncovered(best))


def llm_test_edits(
    root: Path, targets: Mapping[str, str | None], changed: Sequence[str]
) -> tuple[list[FileEdit], tuple[str, ...], Placement] | Declined:
    """The LLM test's edit (and the step's, where its dependencies miss a changed file), the
    node ids to run, and where CI runs them."""
    from bot.codemods.ci_step_dependency import add_step_dependency
    from bot.codemods.llm_target_test import (
        LLM_TEST_PATH,
        TARGETS_NAME,
        add_llm_targets,
        llm_test_node_id,
    )
    from bot.codemods.spans import TopLevel

    where = placement(root, changed)
    if isinstance(where, Declined):
        return where
    listed = ", ".join(sorted(targets))
    checked = sorted(arch for arch, norm in targets.items() if norm is not None)
    edits = [
        FileEdit(
            path=LLM_TEST_PATH,
            kind=LLM_TEST_KIND,
            description=(
                f"a test through LLM: {listed} loads with extract_hidden_states and keeps "
                "its greedy output"
                + (
                    f"; the stream captured after the last layer of {', '.join(checked)} is "
                    "what the final norm reads"
                    if checked
                    else ""
                )
            ),
            steps=(step(add_llm_targets, targets=dict(sorted(targets.items()))),),
            confined_to=(TopLevel(TARGETS_NAME),),
            creates=not (root / LLM_TEST_PATH).exists(),
        )
    ]
    if where.uncovered:
        assert where.step.key is not None
        edits.append(
            FileEdit(
                path=where.step.file,
                kind=CI_STEP_KIND,
                description=(
                    f"the {where.step.label} step runs for changes to " + ", ".join(where.uncovered)
                ),
                steps=tuple(
                    step(add_step_dependency, step_key=where.step.key, path=path)
                    for path in where.uncovered
                ),
                confined_to=(),
            )
        )
    node_ids = tuple(llm_test_node_id(arch) for arch in sorted(targets))
    return edits, node_ids, where


# --- what publish re-checks (the targets and the step re-derived from the base commit) ------

TargetsOf = Callable[[PublishedEdit], "dict[str, str | None]"]


def llm_test_rule(
    targets_of: TargetsOf, stand_in_refused: Callable[[PublishedEdit], str | None] | None = None
) -> PublishRule:
    """The rule for the ``llm-test`` kind: the file is what :func:`bot.codemods.
    llm_target_test.add_llm_targets` makes of its text before the commit (a new file, or
    the test an earlier commit wrote) with exactly the targets ``targets_of`` derives from
    the base commit for the plan's class: each architecture and its decoder's final norm.
    On a base without ``tests/AGENTS.md`` the file is allowed only where the recipe's own
    test in the tree's style cannot be written (``stand_in_refused`` says why, from the base;
    None: it can, so that test is the one to contribute)."""
    from bot.codemods.base import CodemodRefused
    from bot.codemods.llm_target_test import LLM_TEST_PATH, add_llm_targets
    from bot.recipes.publish_rules import require_written_file

    def rule(edit: PublishedEdit) -> None:
        if edit.path != LLM_TEST_PATH:
            raise CodemodRefused(f"the test through LLM goes in {LLM_TEST_PATH}")
        root = _base_root(edit)
        if not follows_agents_rules(root):
            refused = stand_in_refused(edit) if stand_in_refused is not None else None
            if refused is None:
                raise CodemodRefused(f"the base has no {AGENTS_RULES}: the tree's own tests apply")
            if (missing := llm_test_unavailable(root)) is not None:
                raise CodemodRefused(missing)
        where = placement(root, [p for p in edit.changed if p.startswith("vllm/")])
        if isinstance(where, Declined):
            raise CodemodRefused(where.reason)
        targets = targets_of(edit)
        require_written_file(edit.after, add_llm_targets(edit.before, targets), "LLM test")

    rule.creates_file = True  # type: ignore[attr-defined]
    return rule


def ci_step_dependency(edit: PublishedEdit) -> None:
    """The ``ci-step-dependency`` kind: the step that runs the LLM test (chosen on the base
    commit as the recipe chooses it) gains exactly the commit's model files it did not cover,
    and nothing else changes."""
    from bot.codemods.base import CodemodRefused
    from bot.codemods.ci_step_dependency import add_step_dependency

    root = _base_root(edit)
    changed = [p for p in edit.changed if p.startswith("vllm/")]
    where = placement(root, changed)
    if isinstance(where, Declined):
        raise CodemodRefused(where.reason)
    if edit.path != where.step.file or not where.uncovered or where.step.key is None:
        raise CodemodRefused("the LLM test's CI step needs no change in this file")
    expected = edit.before
    for path in where.uncovered:
        expected = add_step_dependency(expected, step_key=where.step.key, path=path)
    if edit.after != expected:
        raise CodemodRefused(
            f"the step does not gain exactly {', '.join(where.uncovered)} in its dependencies"
        )


def _base_root(edit: PublishedEdit) -> Path:
    from bot.codemods.base import CodemodRefused

    if edit.base is None:
        raise CodemodRefused("no base tree to re-derive the test's placement from")
    return edit.base.scan().root


def declaration_targets(root: Path, archs: Sequence[str]) -> dict[str, str | None] | Declined:
    """The LLM test's targets for a declaration: the first architecture with an example model
    (or, for a wrapper family's several architectures, each that has one), no capture check
    (the decoder's capture is the language model's own, not this fix's)."""
    if len(archs) <= 1:
        arch = example_arch(root, archs)
        return arch if isinstance(arch, Declined) else {arch: None}
    found = [a for a in archs if not isinstance(example_arch(root, [a]), Declined)]
    if found:
        return dict.fromkeys(found)
    missing = example_arch(root, archs)
    return missing if isinstance(missing, Declined) else {missing: None}


def base_finding(edit: PublishedEdit, recipe: str) -> Finding:
    """The recipe's own finding for the plan's class on the base commit (the plan's finding
    picks among same-named classes by its path, nothing else)."""
    from bot.codemods.base import CodemodRefused
    from bot.recipes import recipe_named

    fixer = recipe_named(recipe)
    if edit.base is None or fixer is None:
        raise CodemodRefused("no base tree to re-derive the test's targets from")
    path = edit.finding.path
    found = [
        f
        for f in fixer.detect(edit.base.scan())
        if f.class_name == edit.class_name and (path is None or f.path == path)
    ]
    if len(found) != 1:
        raise CodemodRefused(f"{edit.class_name} is not one {recipe} finding at the base")
    return found[0]


def declaration_rule(recipe: str) -> PublishRule:
    """The ``llm-test`` rule of a declaring recipe: the targets of the class's finding at the
    base commit (a platform variant gets no test through LLM: the platform picks the class)."""

    def targets_of(edit: PublishedEdit) -> dict[str, str | None]:
        from bot.codemods.base import CodemodRefused

        finding = base_finding(edit, recipe)
        if platform_variant(finding):
            raise CodemodRefused("a platform variant's test pins its class; not through LLM")
        targets = declaration_targets(_base_root(edit), finding.architectures)
        if isinstance(targets, Declined):
            raise CodemodRefused(targets.reason)
        return targets

    return llm_test_rule(targets_of)


def declaration_test(
    root: Path, finding: Finding, edits: Sequence[FileEdit]
) -> tuple[list[FileEdit], tuple[str, ...]] | Declined | None:
    """A declaring plan's test through LLM on a tree with tests/AGENTS.md (None elsewhere, and
    for a platform variant, whose own test pins its class)."""
    if not follows_agents_rules(root) or platform_variant(finding):
        return None
    targets = declaration_targets(root, finding.architectures)
    if isinstance(targets, Declined):
        return targets
    changed = sorted({e.path for e in edits if e.path.startswith("vllm/")})
    planned = llm_test_edits(root, targets, changed)
    if isinstance(planned, Declined):
        return planned
    return planned[0], planned[1]
