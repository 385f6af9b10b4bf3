"""What ``bot publish`` re-checks for the edit kinds of the ``eagle3-enable`` recipe.

Nothing about the capture is taken from the plan: the decoder, its file, the residual passed,
whether layers count from ``self.start_layer`` and whether a loop over every layer is sliced to
this stage are what the recipe derives (:func:`bot.recipes.eagle3_enable.recipe.capture_of`) from a
scan of the plan's base commit. On the base text, the mixin appended to the decoder's bases and
:func:`bot.codemods.nested_capture.add_capture` applied with exactly those arguments must give
the patched class (and a nested decoder's child, which takes the mixin too), by AST (so ruff's
formatting does not matter and anything else does).
Imports: only the mixin (and the interface, when the target is in the same file). The
contributed forward test is the one the recipe writes from the same scan, whole.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from bot.codemods.aux_forward_test import aux_test_path, new_aux_test_file
from bot.codemods.base import CodemodRefused
from bot.codemods.bases import append_base_class
from bot.codemods.delegate_methods import add_decoder_delegation
from bot.codemods.nested_capture import add_capture
from bot.codemods.regression_test import REGISTRY_TEST_FUNCTION
from bot.codemods.spans import AfterClassBody, ClassBody, ClassHeader, Imports, Span
from bot.recipes.base import Declined, PublishedEdit, PublishRule, ScanContext
from bot.recipes.eagle3_analysis import INTERFACE, MIXIN
from bot.recipes.eagle3_enable.detection import delegates
from bot.recipes.eagle3_enable.shared import SHARED_DECODER, SHARED_INTERFACE, shared_edits
from bot.recipes.eagle3_interface.publish import (
    declare_interface,
    from_interfaces,
    parametrized_archs_of,
    regression_test,
)
from bot.recipes.llm_test import CI_STEP_KIND, LLM_TEST_KIND, ci_step_dependency, llm_test_rule
from bot.recipes.publish_rules import (
    MODEL_FILE,
    confined,
    dump,
    functions,
    module_class,
    only_new_imports,
    require_bound,
    require_written_file,
    same_other_statements,
)
from bot.recipes.registry_edit import registry_entry

if TYPE_CHECKING:
    from bot.recipes.eagle3_enable.recipe import Capture
    from bot.recipes.eagle3_enable.shared import SharedSet


def enable_decoder(edit: PublishedEdit) -> None:
    _enable(edit, declares=False)


def enable_decoder_and_declare(edit: PublishedEdit) -> None:
    _enable(edit, declares=True)


def _enable(edit: PublishedEdit, declares: bool) -> None:
    path, before, after, class_name = edit.path, edit.before, edit.after, edit.class_name
    if not MODEL_FILE.match(path):
        raise CodemodRefused("not a model file; decoders are edited in model files only")
    capture = _capture(edit)
    decoder = capture.decoder
    if capture.decoder_path != path:
        raise CodemodRefused(f"{class_name}'s decoder {decoder} is in {capture.decoder_path}")
    if declares != (capture.target_path == path):
        raise CodemodRefused(f"{class_name} declares {INTERFACE} in {capture.target_path}")
    classes = _edited_classes(capture)
    spans: list[Span] = [Imports()]
    for name in classes:
        module_class(before, name)  # the decoder (and its child) must be classes of the base file
        spans += [ClassHeader(name), ClassBody(name)]
    allowed_imports = {MIXIN: from_interfaces}
    allowed_classes: dict[str, type[ast.stmt]] = dict.fromkeys(classes, ast.ClassDef)
    delegation = delegates(capture.candidate.reached, capture.shape.layers_attr)
    if declares:
        spans.append(ClassHeader(class_name))
        if delegation:
            spans += [ClassBody(class_name), AfterClassBody(class_name)]
        allowed_imports[INTERFACE] = from_interfaces
        allowed_classes[class_name] = ast.ClassDef
    confined(before, after, spans)
    only_new_imports(before, after, allowed_imports)
    require_bound(after, allowed_imports)
    same_other_statements(before, after, allowed=allowed_classes)
    _check_decoder(before, after, capture)
    if declares and delegation:
        expected = add_decoder_delegation(
            append_base_class(before, class_name, INTERFACE),
            class_name,
            capture.candidate.reached,
            capture.shape.layers_attr,
        )
        if dump(module_class(expected, class_name)) != dump(module_class(after, class_name)):
            raise CodemodRefused(
                f"the change to {class_name} is not {INTERFACE} and the two methods reaching "
                f"self.{capture.candidate.reached} the recipe writes"
            )
    elif declares:
        old, new = module_class(before, class_name), module_class(after, class_name)
        gained = ast.Name(INTERFACE, ast.Load())
        same = (
            dump(old.body) == dump(new.body)
            and dump(old.decorator_list) == dump(new.decorator_list)
            and dump(old.keywords) == dump(new.keywords)
        )
        if not same or dump(new.bases) != dump([*old.bases, gained]):
            raise CodemodRefused(f"the change to {class_name} is more than adding {INTERFACE}")
    else:
        for name in {class_name} - set(classes):
            try:
                old = module_class(before, name)
            except CodemodRefused:
                continue  # the target lives in another file (declare-interface checks it)
            if dump(old) != dump(module_class(after, name)):
                raise CodemodRefused(f"the patch changes {name} in the decoder's file")


def _capture(edit: PublishedEdit) -> Capture:
    """The recipe's capture for the plan's class, from a scan of the base tree. The plan's
    finding only picks the target's file among same-named classes (platform variants)."""
    from bot.recipes.eagle3_enable.recipe import capture_of

    found = capture_of(_base_scan(edit), edit.class_name, edit.finding.path)
    if found is None:
        raise CodemodRefused(f"{edit.class_name} is not a ready eagle3-enable target at the base")
    return found


def _base_scan(edit: PublishedEdit) -> ScanContext:
    if edit.base is None:
        raise CodemodRefused("publish has no base tree to derive the aux capture from")
    return edit.base.scan()


def _edited_classes(capture: Capture) -> list[str]:
    """The decoder, and a nested decoder's child (both take the mixin)."""
    child = capture.shape.child
    return [capture.decoder, *([child] if child else [])]


def _check_decoder(before: str, after: str, capture: Capture) -> None:
    """The patched decoder class (and a nested decoder's child) is exactly what the recipe's
    codemods write on the base."""
    decoder = capture.decoder
    with_mixin = before
    for name in _edited_classes(capture):
        with_mixin = append_base_class(with_mixin, name, MIXIN)
    try:
        expected = add_capture(with_mixin, **capture.capture_args())
    except CodemodRefused as refused:
        raise CodemodRefused(f"the recipe writes no aux capture in {decoder}: {refused}") from None
    for name in _edited_classes(capture):
        if dump(module_class(expected, name)) != dump(module_class(after, name)):
            raise CodemodRefused(
                f"the change to {name} is not the mixin and the aux capture the recipe writes"
            )


def enable_shared_decoder(edit: PublishedEdit) -> None:
    """A set's decoder file: exactly what the recipe's codemods write on the base text for the
    set derived from the base tree (the mixin, the capture, the interface on its targets)."""
    _shared_model_file(edit)


def declare_shared_interface(edit: PublishedEdit) -> None:
    """Another file of a set's targets: exactly the interface on those targets."""
    _shared_model_file(edit)


def _shared_model_file(edit: PublishedEdit) -> None:
    if not MODEL_FILE.match(edit.path):
        raise CodemodRefused("not a model file; decoders are edited in model files only")
    planned = {e.path: e for e in shared_edits(_base_scan(edit), _shared(edit))}
    expected = planned.get(edit.path)
    if expected is None or expected.kind != edit.kind:
        raise CodemodRefused(f"the set's plan makes no {edit.kind} edit of {edit.path}")
    confined(edit.before, edit.after, expected.confined_to)
    if dump(ast.parse(edit.after)) != dump(ast.parse(expected.apply(edit.before))):
        raise CodemodRefused(f"{edit.path} is not what the recipe writes for the set")


def _shared(edit: PublishedEdit) -> SharedSet:
    """The set the plan's class leads, from a scan of the base tree (never from the plan)."""
    from bot.recipes.eagle3_enable.shared import shared_set_of

    found = shared_set_of(_base_scan(edit), edit.class_name, edit.finding.path)
    if found is None or found.lead.ref.name != edit.class_name:
        raise CodemodRefused(
            f"{edit.class_name} does not lead a set of targets fixed together at the base"
        )
    return found


def aux_forward_test(edit: PublishedEdit) -> None:
    """A new file, exactly the test the recipe writes for the target: every field (module,
    decoder, residual semantics, final norm, stream multipliers) read from the base tree.
    For a set's plan, the file of one module's targets (one test each)."""
    from bot.recipes.eagle3_enable.forward_reads import forward_test_fields

    if edit.before:
        raise CodemodRefused("the forward test is a new file; this one existed")
    if _is_shared(edit):
        _shared_forward_test(edit)
        return
    capture = _capture(edit)
    fields = forward_test_fields(_base_scan(edit), capture.candidate, capture.shape)
    if isinstance(fields, Declined):
        raise CodemodRefused(fields.reason)
    if edit.path != aux_test_path(fields["module"]):
        raise CodemodRefused("the forward test is not where the recipe puts it")
    require_written_file(edit.after, new_aux_test_file(**fields), "forward test")


aux_forward_test.creates_file = True  # type: ignore[attr-defined]


def enable_regression_test(edit: PublishedEdit) -> None:
    """The regression test as eagle3-interface's rule allows it; for a set's plan, the
    architectures it adds are exactly the set's (one per member, read from the base)."""
    regression_test(edit)
    if not _is_shared(edit):
        return
    wanted = {min(e.arch for e in member.entries) for member in _shared(edit).members}
    old = functions(edit.before).get(REGISTRY_TEST_FUNCTION)
    new = functions(edit.after).get(REGISTRY_TEST_FUNCTION)
    added = set(parametrized_archs_of(new)) - set(parametrized_archs_of(old))
    if added != wanted:
        raise CodemodRefused(
            "the regression test does not add exactly the set's architectures "
            f"({', '.join(sorted(wanted))})"
        )


def _is_shared(edit: PublishedEdit) -> bool:
    """Whether the plan says it fixes a set of targets sharing a decoder (which rule applies;
    the rule then derives the set itself from the base tree)."""
    return edit.finding.evidence.fixed_with() is not None


def _shared_forward_test(edit: PublishedEdit) -> None:
    from bot.codemods.aux_forward_test import new_shared_aux_test_file
    from bot.recipes.eagle3_enable.shared import shared_forward_tests

    planned = shared_forward_tests(_base_scan(edit), _shared(edit))
    if isinstance(planned, Declined):
        raise CodemodRefused(planned.reason)
    if edit.path not in planned:
        raise CodemodRefused("the forward test is not where the recipe puts it")
    module, tests = planned[edit.path]
    expected = new_shared_aux_test_file(module=module, tests=tests)
    require_written_file(edit.after, expected, "forward test")


def _llm_targets(edit: PublishedEdit) -> dict[str, str | None]:
    """The LLM test's targets for the plan's class (or its set), from the base commit."""
    from bot.recipes.eagle3_enable.recipe import llm_targets

    if _is_shared(edit):
        found = _shared(edit)
        members = [(m, found.capture.shape) for m in found.members]
    else:
        capture = _capture(edit)
        members = [(capture.candidate, capture.shape)]
    targets = llm_targets(_base_scan(edit), members)
    if isinstance(targets, Declined):
        raise CodemodRefused(targets.reason)
    return targets


def _stand_in_refused(edit: PublishedEdit) -> str | None:
    """Why the recipe's stand-in forward test cannot be written for the plan at the base (on a
    tree without tests/AGENTS.md the test through LLM then takes its place), or None."""
    from bot.recipes.eagle3_enable.forward_reads import forward_test_fields
    from bot.recipes.eagle3_enable.shared import shared_forward_tests

    scan = _base_scan(edit)
    if _is_shared(edit):
        planned = shared_forward_tests(scan, _shared(edit))
        if isinstance(planned, Declined):
            return planned.reason
        paths = list(planned)
    else:
        capture = _capture(edit)
        fields = forward_test_fields(scan, capture.candidate, capture.shape)
        if isinstance(fields, Declined):
            return fields.reason
        paths = [aux_test_path(fields["module"])]
    existing = [path for path in paths if (scan.root / path).exists()]
    return f"no contributed forward test ({existing[0]} exists)" if existing else None


PUBLISH_RULES: dict[str, PublishRule] = {
    "aux-forward-test": aux_forward_test,
    LLM_TEST_KIND: llm_test_rule(_llm_targets, _stand_in_refused),
    CI_STEP_KIND: ci_step_dependency,
    "enable-decoder": enable_decoder,
    "enable-decoder-and-declare": enable_decoder_and_declare,
    SHARED_DECODER: enable_shared_decoder,
    SHARED_INTERFACE: declare_shared_interface,
    "declare-interface": declare_interface,
    "registry-entry": registry_entry,
    "regression-test": enable_regression_test,
}
