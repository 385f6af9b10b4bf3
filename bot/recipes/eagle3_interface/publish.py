"""What ``bot publish`` re-checks for each edit kind of the ``eagle3-interface`` recipe.

Each rule is the publish-time twin of one FileEdit the recipe plans: the same spans, resolved on
the base file's text, plus what the change means: the declaration is the recipe's own codemods
re-applied on the base text (only the interface imported, ``SupportsEagle3`` the class's last
base), a regression test is exactly the one the codemod writes. The registry entry's rule is the
one every recipe shares (:func:`bot.recipes.registry_edit.registry_entry`). ``eagle3-wrapper``
reuses the regression-test rule: its plans add the same tests.
"""

from __future__ import annotations

import ast

from bot.codemods.base import CodemodRefused
from bot.codemods.regression_test import (
    REGISTRY_TEST_FUNCTION,
    add_registry_eagle3_test,
    advertises_test_name,
    variant_test_name,
    variant_test_source,
)
from bot.codemods.spans import ClassHeader, Imports, TopLevel
from bot.recipes.base import PublishedEdit, PublishRule
from bot.recipes.eagle3_analysis import INTERFACE
from bot.recipes.llm_test import CI_STEP_KIND, LLM_TEST_KIND, ci_step_dependency, declaration_rule
from bot.recipes.publish_rules import (
    IDENTIFIER,
    MODEL_FILE,
    TEST_FILE,
    confined,
    dump,
    functions,
    module_class,
    only_new_imports,
    require_bound,
    require_recipe_edit,
    same_other_statements,
    statement_gaps,
)
from bot.recipes.registry_edit import registry_entry
from bot.tree.layout import INTERFACES_MODULE, platform_of


def from_interfaces(module: str) -> bool:
    return module in (".interfaces", INTERFACES_MODULE)


def _from_vllm(module: str) -> bool:
    return module.startswith("vllm.")


def declare_interface(edit: PublishedEdit) -> None:
    """Exactly what the recipe's declaration (:func:`bot.recipes.eagle3_interface.recipe.
    declare_interface_edit`: the import, then ``SupportsEagle3`` as the class's last base)
    writes when re-applied on the base text."""
    from bot.recipes.eagle3_interface.recipe import declare_interface_edit

    path, before, after, class_name = edit.path, edit.before, edit.after, edit.class_name
    if not MODEL_FILE.match(path):
        raise CodemodRefused("not a model file; the interface is declared in model files only")
    # The AST comparison cannot see comments: the changed lines must lie in the recipe's spans.
    confined(before, after, [Imports(), ClassHeader(class_name)])
    only_new_imports(before, after, {INTERFACE: from_interfaces})
    require_bound(after, [INTERFACE])
    module_class(before, class_name)  # the class must be one of the base file's
    require_recipe_edit(after, declare_interface_edit(path, before, class_name).apply(before))


def regression_test(edit: PublishedEdit) -> None:
    path, before, after, class_name = edit.path, edit.before, edit.after, edit.class_name
    if not TEST_FILE.match(path):
        raise CodemodRefused("regression tests go under tests/models only")
    variant = _variant(edit)
    names = {advertises_test_name(class_name), REGISTRY_TEST_FUNCTION}
    if variant is not None:
        names.add(variant_test_name(class_name, variant))
    existing = [TopLevel(name) for name in names if name in functions(before)]
    confined(before, after, [Imports(), *existing], extra=statement_gaps(before))
    only_new_imports(before, after, {"supports_eagle3": from_interfaces, class_name: _from_vllm})
    same_other_statements(before, after, allowed=dict.fromkeys(names, ast.FunctionDef))
    old_functions = functions(before)
    for name, function in functions(after).items():
        if name in names and dump(function) != dump(old_functions.get(name, [])):
            _check_test_function(function, old_functions.get(name), edit, variant)


def _variant(edit: PublishedEdit) -> str | None:
    """The platform package of the finding's module (``amd``), from the plan's finding."""
    return platform_of(edit.finding.module.split("."))


def _check_test_function(
    function: ast.FunctionDef,
    existing: ast.FunctionDef | None,
    edit: PublishedEdit,
    variant: str | None,
) -> None:
    """A new or extended regression test is exactly what the codemod writes: the same body
    as before (or the codemod's); the registry test's new parameters (and the platform skips
    they carry) re-derived from the base file."""
    class_name = edit.class_name
    if variant is not None and function.name == variant_test_name(class_name, variant):
        text = variant_test_source(edit.finding.module, class_name, variant)
    elif function.name == advertises_test_name(class_name):
        text = f"def {function.name}():\n    assert supports_eagle3({class_name})\n"
    elif any(_skipped_params(function)):
        new = [a for a in _parametrized_archs(function) if a not in parametrized_archs_of(existing)]
        derived = functions(add_registry_eagle3_test(edit.before, new)).get(function.name)
        if derived is None or dump(function) != dump(derived):
            raise CodemodRefused(f"{function.name} is not the regression test the recipe writes")
        return
    else:
        listed = ", ".join(f'"{arch}"' for arch in _parametrized_archs(function))
        text = (
            f'@pytest.mark.parametrize("model_arch", [{listed}])\n'
            f"def {function.name}(model_arch):\n"
            "    model_cls = ModelRegistry._try_load_model_cls(model_arch)\n"
            "    assert model_cls is not None\n"
            "    assert supports_eagle3(model_cls)\n"
        )
    expected = ast.parse(text).body[0]
    assert isinstance(expected, ast.FunctionDef)
    if existing is not None:  # upstream's own test: keep its body, only the list may grow
        expected.body, expected.args = existing.body, existing.args
    if dump(function) != dump(expected):
        raise CodemodRefused(f"{function.name} is not the regression test the recipe writes")


def _param_arch(element: ast.expr) -> object:
    """``"X"`` or ``pytest.param("X", marks=...)``: the architecture named."""
    if (
        isinstance(element, ast.Call)
        and ast.unparse(element.func) == "pytest.param"
        and element.args
        and isinstance(element.args[0], ast.Constant)
    ):
        return element.args[0].value
    return element.value if isinstance(element, ast.Constant) else None


def _skipped_params(function: ast.FunctionDef) -> list[bool]:
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call) and len(decorator.args) == 2:
            return [isinstance(e, ast.Call) for e in getattr(decorator.args[1], "elts", [])]
    return []


def parametrized_archs_of(function: ast.FunctionDef | None) -> list[str]:
    return _parametrized_archs(function) if function is not None else []


def _parametrized_archs(function: ast.FunctionDef) -> list[str]:
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call) and len(decorator.args) == 2:
            listed = decorator.args[1]
            names = [_param_arch(e) for e in getattr(listed, "elts", [])]
            if (
                isinstance(listed, ast.List)
                and len(names) == len(listed.elts)
                and all(isinstance(n, str) and IDENTIFIER.match(n) for n in names)
            ):
                return names
    raise CodemodRefused(f"{function.name} is not parametrized over architecture names")


PUBLISH_RULES: dict[str, PublishRule] = {
    "declare-interface": declare_interface,
    "registry-entry": registry_entry,
    "regression-test": regression_test,
    LLM_TEST_KIND: declaration_rule("eagle3-interface"),
    CI_STEP_KIND: ci_step_dependency,
}
