"""Codemod: a CPU regression test asserting that a model class advertises SupportsEagle3.

Upstream's pre-commit rejects test files no CI job collects, so we extend an existing file:
(a) a model package's test file that already asserts ``supports_eagle3`` (as
``tests/models/kimi_k3/test_eagle3.py`` does), else (b) a parametrized test in
``tests/models/test_registry.py``, which every release has and CI collects.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

from bot.codemods.base import (
    Case,
    CodemodRefused,
    parse,
    require_dotted,
    require_identifier,
    shown,
)
from bot.codemods.imports import add_import_name
from bot.codemods.layout import insert_element
from bot.tree.layout import INTERFACES_MODULE, REGISTRY_PATH, REGISTRY_TEST, platform_of

if TYPE_CHECKING:
    from bot.codemods.spans import Span

REGISTRY_TEST_FUNCTION = "test_registry_supports_eagle3"


@dataclass(frozen=True)
class RegressionTestEdit:
    """The test file to change (relative to the tree), its text before and after, and the
    pytest node ids that exercise the new assertion."""

    path: str
    before: str
    after: str
    node_ids: list[str]


def add_eagle3_regression_test(
    tree_root: Path,
    *,
    class_name: str,
    class_module: str,
    archs: Sequence[str],
    platform_variant: bool = False,
) -> RegressionTestEdit:
    """Plan the regression test for ``class_module.class_name`` (registered as ``archs``).

    A ``platform_variant`` (one of vllm/models/<pkg>/{nvidia,amd,...}) is tested through the
    registry: importing it by name from a package test would pin one platform's class, while
    the registry loads the variant of whichever platform runs the test.
    """
    require_identifier(class_name, "class name")
    require_dotted(class_module, "class module")
    if class_module.startswith(".") or not class_module.startswith("vllm."):
        raise CodemodRefused(f"class module must be an absolute vllm module: {shown(class_module)}")
    for arch in archs:
        require_identifier(arch, "architecture")
    _require_defined(tree_root, INTERFACES_MODULE, "supports_eagle3", ast.FunctionDef)
    _require_defined(tree_root, class_module, class_name, ast.ClassDef)
    variant = _variant_of(class_module) if platform_variant else None
    if variant is not None and _package_test_file(tree_root, class_module) is not None:
        return _variant_test(tree_root, class_module, class_name, variant)
    package_test = None if platform_variant else _package_test_file(tree_root, class_module)
    if package_test is not None:
        before = package_test.read_text()
        after = add_advertises_test(before, class_module, class_name)
        path = package_test.relative_to(tree_root).as_posix()
        name = _advertising_test_name(after, class_name)
        return RegressionTestEdit(path, before, after, [f"{path}::{name}"])
    if not archs:
        raise CodemodRefused("no registry architecture given for the registry test")
    _require_registry_can_load(tree_root, archs)
    test_file = tree_root / REGISTRY_TEST
    if not test_file.is_file():
        raise CodemodRefused(f"{REGISTRY_TEST} is missing from this tree")
    before = test_file.read_text()
    after = add_registry_eagle3_test(before, archs)
    ids = [f"{REGISTRY_TEST}::{REGISTRY_TEST_FUNCTION}[{arch}]" for arch in archs]
    return RegressionTestEdit(REGISTRY_TEST, before, after, ids)


def _variant_of(class_module: str) -> str | None:
    """``amd`` for vllm.models.<pkg>.amd.<module>: the platform package the class lives in."""
    return platform_of(class_module.split("."))


def _variant_test(
    tree_root: Path, class_module: str, class_name: str, variant: str
) -> RegressionTestEdit:
    """A platform variant is imported from its own module, inside the test: the registry (and
    the package's ``__init__``) would resolve the name to whichever variant this platform
    loads, so a test through them passes or fails for another class than the patched one."""
    package_test = _package_test_file(tree_root, class_module)
    if package_test is None:
        raise CodemodRefused(
            f"no test file in tests/models/ asserts supports_eagle3 for {class_module}'s "
            "package: a platform variant is tested by importing it there"
        )
    before = package_test.read_text()
    after = add_variant_test(before, class_module, class_name, variant)
    path = package_test.relative_to(tree_root).as_posix()
    return RegressionTestEdit(
        path, before, after, [f"{path}::{variant_test_name(class_name, variant)}"]
    )


def variant_test_name(class_name: str, variant: str) -> str:
    return f"test_{snake_case(class_name)}_{variant}_advertises_eagle3_support"


def variant_test_source(class_module: str, class_name: str, variant: str) -> str:
    require_dotted(class_module, "class module")
    require_identifier(class_name, "class name")
    require_identifier(variant, "platform variant")
    package, _, module = class_module.rpartition(".")
    return (
        f"def {variant_test_name(class_name, variant)}():\n"
        f"    from {package} import {module}\n"
        "\n"
        f"    assert supports_eagle3({module}.{class_name})\n"
    )


def add_variant_test(source: str, class_module: str, class_name: str, variant: str) -> str:
    """Add ``test_<class>_<variant>_advertises_eagle3_support``, importing the variant's class
    in its body (the file may bind the same name to another platform's class)."""
    name = variant_test_name(class_name, variant)
    if any(
        isinstance(node, ast.FunctionDef) and node.name == name for node in ast.parse(source).body
    ):
        return source
    if not _imports_supports_eagle3(source):
        raise CodemodRefused("the test file does not import supports_eagle3; not guessing how")
    tree = parse(source)
    function = cst.parse_statement(variant_test_source(class_module, class_name, variant))
    position = _after_last_function(tree, lambda n: n.endswith("_eagle3_support"))
    return _insert_statement(tree, position, function).code


def snake_case(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return re.sub(r"_+", "_", spaced).lower().strip("_")


def advertises_test_name(class_name: str) -> str:
    return f"test_{snake_case(class_name)}_advertises_eagle3_support"


def regression_test_spans() -> tuple[Span, ...]:
    """Where a regression-test edit may change a test file: imports, new statements between
    existing ones, and the registry test's own lines (its parameter list grows)."""
    from bot.codemods.spans import BetweenTopLevel, Imports, TopLevelIfPresent

    return (Imports(), BetweenTopLevel(), TopLevelIfPresent(REGISTRY_TEST_FUNCTION))


# --- (a) a model package's own test file -------------------------------------------------


def add_advertises_test(source: str, class_module: str, class_name: str) -> str:
    """Add ``test_<class>_advertises_eagle3_support`` and import the class from its module."""
    require_identifier(class_name, "class name")
    if _asserting_test(source, class_name) is not None:
        return source
    source = add_import_name(source, class_module, class_name)
    tree = parse(source)
    function = cst.parse_statement(
        f"def {advertises_test_name(class_name)}():\n    assert supports_eagle3({class_name})\n"
    )
    position = _after_last_function(tree, lambda name: name.endswith("_eagle3_support"))
    return _insert_statement(tree, position, function).code


def _asserting_test(source: str, class_name: str) -> str | None:
    """The name of a module-level test that already asserts ``supports_eagle3(class_name)``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Name)
                    and inner.func.id == "supports_eagle3"
                    and any(isinstance(a, ast.Name) and a.id == class_name for a in inner.args)
                ):
                    return node.name
    return None


def _advertising_test_name(source: str, class_name: str) -> str:
    name = _asserting_test(source, class_name)
    assert name is not None
    return name


def _package_test_file(tree_root: Path, class_module: str) -> Path | None:
    parts = class_module.split(".")
    if parts[:2] == ["vllm", "models"] and len(parts) > 2:
        package = parts[2]
    elif parts[:3] == ["vllm", "model_executor", "models"] and len(parts) > 3:
        package = parts[3]
    else:
        return None
    directory = tree_root / "tests" / "models" / package
    if not directory.is_dir():
        return None
    candidates = sorted(directory.glob("test_*.py"), key=lambda p: (p.name != "test_eagle3.py", p))
    for candidate in candidates:
        text = candidate.read_text()
        if "supports_eagle3" in text and _imports_supports_eagle3(text):
            return candidate
    return None


def _imports_supports_eagle3(source: str) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == INTERFACES_MODULE
        and any(alias.name == "supports_eagle3" and alias.asname is None for alias in node.names)
        for node in ast.parse(source).body
    )


# --- (b) the parametrized registry test ----------------------------------------------------


def add_registry_eagle3_test(source: str, archs: Sequence[str]) -> str:
    """Add ``archs`` to ``test_registry_supports_eagle3``'s parameters, creating it if needed."""
    for arch in archs:
        require_identifier(arch, "architecture")
    bound = _module_level_bound_names(source)
    for needed in ("pytest", "ModelRegistry"):
        if needed not in bound:
            raise CodemodRefused(f"{REGISTRY_TEST} does not import {needed}; not guessing how")
    skips = {arch: platform_skip(source, arch) for arch in archs}
    source = add_import_name(source, INTERFACES_MODULE, "supports_eagle3")
    tree = parse(source)
    existing = [
        index
        for index, statement in enumerate(tree.body)
        if isinstance(statement, cst.FunctionDef) and statement.name.value == REGISTRY_TEST_FUNCTION
    ]
    if existing:
        body = list(tree.body)
        function = body[existing[0]]
        assert isinstance(function, cst.FunctionDef)
        body[existing[0]] = _with_archs(function, archs, skips)
        return tree.with_changes(body=body).code
    listed = ", ".join(_arch_element(arch, skips[arch]) for arch in sorted(archs))
    function = cst.parse_statement(
        f'@pytest.mark.parametrize("model_arch", [{listed}])\n'
        f"def {REGISTRY_TEST_FUNCTION}(model_arch):\n"
        "    model_cls = ModelRegistry._try_load_model_cls(model_arch)\n"
        "    assert model_cls is not None\n"
        "    assert supports_eagle3(model_cls)\n"
    )
    position = _after_last_function(tree, lambda name: name.startswith("test_registry_"))
    return _insert_statement(tree, position, function).code


def platform_skip(source: str, arch: str) -> tuple[str, str] | None:
    """The skip ``test_registry_imports`` applies to ``arch`` off its platforms, as the
    condition's and the reason's source (``not current_platform.is_cuda()``, ``"Dots3 NOTE
    is only supported on CUDA"``): a test that imports the class must skip where it does."""
    function = next(
        (
            node
            for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef) and node.name == "test_registry_imports"
        ),
        None,
    )
    if function is None:
        return None
    for statement in function.body:
        if not (isinstance(statement, ast.If) and len(statement.body) == 1):
            continue
        reason = _skip_reason(statement.body[0])
        test = statement.test
        if reason is None or not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
            continue
        names_arch = [v for v in test.values if _names_arch(v, arch)]
        if len(names_arch) != 1 or len(test.values) < 2:
            continue
        rest = [v for v in test.values if v is not names_arch[0]]
        condition = " and ".join(ast.unparse(v) for v in rest)
        return condition, json.dumps(reason, ensure_ascii=False)
    return None


def _skip_reason(statement: ast.stmt) -> str | None:
    call = statement.value if isinstance(statement, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and ast.unparse(call.func) == "pytest.skip"
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    ):
        return call.args[0].value
    return None


def _names_arch(test: ast.expr, arch: str) -> bool:
    """``model_arch == "X"`` or ``model_arch in ("X", ...)`` naming ``arch``."""
    if not (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "model_arch"
        and len(test.ops) == 1
    ):
        return False
    right = test.comparators[0]
    if isinstance(test.ops[0], ast.Eq):
        return isinstance(right, ast.Constant) and right.value == arch
    if isinstance(test.ops[0], ast.In) and isinstance(right, ast.Tuple | ast.List | ast.Set):
        return any(isinstance(e, ast.Constant) and e.value == arch for e in right.elts)
    return False


def _arch_element(arch: str, skip: tuple[str, str] | None) -> str:
    if skip is None:
        return f'"{arch}"'
    condition, reason = skip
    return f'pytest.param("{arch}", marks=pytest.mark.skipif({condition}, reason={reason}))'


def _element_arch(element: cst.BaseElement) -> str | None:
    """The architecture a parameter names: ``"X"`` or ``pytest.param("X", ...)``."""
    value = element.value
    if isinstance(value, cst.SimpleString):
        evaluated = value.evaluated_value
        return evaluated if isinstance(evaluated, str) else None
    if (
        isinstance(value, cst.Call)
        and cst.Module([]).code_for_node(value.func) == "pytest.param"
        and value.args
        and isinstance(value.args[0].value, cst.SimpleString)
    ):
        evaluated = value.args[0].value.evaluated_value
        return evaluated if isinstance(evaluated, str) else None
    return None


def _with_archs(
    function: cst.FunctionDef,
    archs: Sequence[str],
    skips: dict[str, tuple[str, str] | None] | None = None,
) -> cst.FunctionDef:
    decorators = list(function.decorators)
    for index, decorator in enumerate(decorators):
        listed = _parametrized_list(decorator)
        if listed is None:
            continue
        new_list = listed
        for arch in archs:
            names = [_element_arch(element) for element in new_list.elements]
            if arch in names:
                continue
            position = len(names)
            if names == sorted(names):  # type: ignore[type-var]
                position = sum(1 for name in names if name is not None and name < arch)
            skip = (skips or {}).get(arch)
            element = cst.Element(cst.parse_expression(_arch_element(arch, skip)))
            new_list = insert_element(new_list, position, element, "lbracket", "rbracket")
        call = decorator.decorator
        assert isinstance(call, cst.Call)
        args = [call.args[0], call.args[1].with_changes(value=new_list), *call.args[2:]]
        decorators[index] = decorator.with_changes(decorator=call.with_changes(args=args))
        return function.with_changes(decorators=decorators)
    raise CodemodRefused(
        f"{REGISTRY_TEST_FUNCTION} is not parametrized over a plain list of model_arch strings"
    )


def _parametrized_list(decorator: cst.Decorator) -> cst.List | None:
    call = decorator.decorator
    if not isinstance(call, cst.Call) or len(call.args) < 2:
        return None
    if cst.Module([]).code_for_node(call.func) != "pytest.mark.parametrize":
        return None
    first, second = call.args[0].value, call.args[1].value
    if not (isinstance(first, cst.SimpleString) and first.evaluated_value == "model_arch"):
        return None
    if not isinstance(second, cst.List) or not all(
        isinstance(element, cst.Element) and _element_arch(element) is not None
        for element in second.elements
    ):
        return None
    return second


# --- shared helpers ------------------------------------------------------------------------


def _module_level_bound_names(source: str) -> set[str]:
    bound: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            bound.update(alias.asname or alias.name for alias in node.names)
    return bound


def _after_last_function(tree: cst.Module, wanted: Callable[[str], bool]) -> int:
    last = None
    for index, statement in enumerate(tree.body):
        if isinstance(statement, cst.FunctionDef) and wanted(statement.name.value):
            last = index
    return len(tree.body) if last is None else last + 1


def _insert_statement(tree: cst.Module, position: int, statement: cst.BaseStatement) -> cst.Module:
    body = list(tree.body)
    statement = statement.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    body.insert(position, statement)
    return tree.with_changes(body=body)


def _module_file(tree_root: Path, module: str) -> Path:
    base = tree_root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    raise CodemodRefused(f"module {module} is not in this tree")


def _require_defined(tree_root: Path, module: str, name: str, kind: type[ast.AST]) -> None:
    tree = ast.parse(_module_file(tree_root, module).read_text())
    if not any(isinstance(node, kind) and node.name == name for node in tree.body):  # type: ignore[attr-defined]
        raise CodemodRefused(f"{module} does not define {name} in this tree")


def _require_registry_can_load(tree_root: Path, archs: Sequence[str]) -> None:
    registry = tree_root / REGISTRY_PATH
    if not registry.is_file():
        raise CodemodRefused(f"{REGISTRY_PATH} is missing from this tree")
    text = registry.read_text()
    if "def _try_load_model_cls(" not in text:
        raise CodemodRefused("ModelRegistry._try_load_model_cls does not exist in this tree")
    for arch in archs:
        if f'"{arch}"' not in text:
            raise CodemodRefused(f"architecture {arch} is not registered in this tree")


_PACKAGE_TEST = """\
from vllm.model_executor.models.interfaces import supports_eagle3
from vllm.models.kimi.model import (
    KimiK3ForConditionalGeneration,
)


def test_kimi_k3_advertises_eagle3_support():
    assert supports_eagle3(KimiK3ForConditionalGeneration)


def test_other():
    pass
"""

_REGISTRY_TEST = """\
import pytest

from vllm.model_executor.models.registry import (
    ModelRegistry,
)


@pytest.mark.parametrize("model_arch", ["LlamaForCausalLM"])
def test_registry_is_pp(model_arch):
    pass


def test_hf_registry_coverage():
    pass
"""

_REGISTRY_TEST_AFTER = """\
import pytest

from vllm.model_executor.models.interfaces import supports_eagle3
from vllm.model_executor.models.registry import (
    ModelRegistry,
)


@pytest.mark.parametrize("model_arch", ["LlamaForCausalLM"])
def test_registry_is_pp(model_arch):
    pass


@pytest.mark.parametrize("model_arch", ["Qwen3NextForCausalLM"])
def test_registry_supports_eagle3(model_arch):
    model_cls = ModelRegistry._try_load_model_cls(model_arch)
    assert model_cls is not None
    assert supports_eagle3(model_cls)


def test_hf_registry_coverage():
    pass
"""

CASES: list[Case] = [
    Case(
        "(a) package test file: import the class, add the test after its kin",
        lambda s: add_advertises_test(s, "vllm.models.kimi.model", "KimiLinearForCausalLM"),
        _PACKAGE_TEST,
        _PACKAGE_TEST.replace(
            "    KimiK3ForConditionalGeneration,\n",
            "    KimiK3ForConditionalGeneration,\n    KimiLinearForCausalLM,\n",
        ).replace(
            "\n\ndef test_other",
            "\n\ndef test_kimi_linear_for_causal_lm_advertises_eagle3_support():\n"
            "    assert supports_eagle3(KimiLinearForCausalLM)\n\n\ndef test_other",
        ),
    ),
    Case(
        "(a) class already asserted: no change",
        lambda s: add_advertises_test(
            s, "vllm.models.kimi.model", "KimiK3ForConditionalGeneration"
        ),
        _PACKAGE_TEST,
    ),
    Case(
        "(b) registry test created after the last test_registry_* function",
        lambda s: add_registry_eagle3_test(s, ["Qwen3NextForCausalLM"]),
        _REGISTRY_TEST,
        _REGISTRY_TEST_AFTER,
    ),
    Case(
        "(b) a later fix adds its arch in sorted order",
        lambda s: add_registry_eagle3_test(s, ["KimiLinearForCausalLM"]),
        _REGISTRY_TEST_AFTER,
        _REGISTRY_TEST_AFTER.replace(
            '["Qwen3NextForCausalLM"]', '["KimiLinearForCausalLM", "Qwen3NextForCausalLM"]'
        ),
    ),
    Case(
        "(b) arch already listed: no change",
        lambda s: add_registry_eagle3_test(s, ["Qwen3NextForCausalLM"]),
        _REGISTRY_TEST_AFTER,
    ),
    Case(
        "(b) file without ModelRegistry: refuse",
        lambda s: add_registry_eagle3_test(s, ["Qwen3NextForCausalLM"]),
        "import pytest\n",
        refuses="does not import ModelRegistry",
    ),
]

_REGISTRY_WITH_SKIP = """\
import pytest

from vllm.model_executor.models.registry import ModelRegistry
from vllm.platforms import current_platform


@pytest.mark.parametrize("model_arch", ModelRegistry.get_supported_archs())
def test_registry_imports(model_arch):
    if model_arch in ("Dots3NoteForCausalLM", "Dots3NoteMTPModel") and not (
        current_platform.is_cuda()
    ):
        pytest.skip("Dots3 NOTE is only supported on CUDA")
    assert ModelRegistry._try_load_model_cls(model_arch) is not None
"""

_DOTS3_PARAM = (
    'pytest.param("Dots3NoteForCausalLM", marks=pytest.mark.skipif('
    'not current_platform.is_cuda(), reason="Dots3 NOTE is only supported on CUDA"))'
)

_REGISTRY_WITH_SKIP_AFTER = (
    _REGISTRY_WITH_SKIP.replace(
        "from vllm.model_executor.models.registry",
        "from vllm.model_executor.models.interfaces import supports_eagle3\n"
        "from vllm.model_executor.models.registry",
    )
    + "\n\n"
    + f'@pytest.mark.parametrize("model_arch", [{_DOTS3_PARAM}])\n'
    "def test_registry_supports_eagle3(model_arch):\n"
    "    model_cls = ModelRegistry._try_load_model_cls(model_arch)\n"
    "    assert model_cls is not None\n"
    "    assert supports_eagle3(model_cls)\n"
)

_VARIANT_TEST = "\n\ndef test_kimi_linear_for_causal_lm_amd_advertises_eagle3_support():\n" + (
    "    from vllm.models.kimi.amd import linear\n\n"
    "    assert supports_eagle3(linear.KimiLinearForCausalLM)\n"
)

CASES += [
    Case(
        "(b) an arch test_registry_imports skips off its platform gets the same skip",
        lambda s: add_registry_eagle3_test(s, ["Dots3NoteForCausalLM"]),
        _REGISTRY_WITH_SKIP,
        _REGISTRY_WITH_SKIP_AFTER,
    ),
    Case(
        "(b) a later arch joins a list holding a skipped parameter, in sorted order",
        lambda s: add_registry_eagle3_test(s, ["AaForCausalLM"]),
        _REGISTRY_WITH_SKIP_AFTER,
        _REGISTRY_WITH_SKIP_AFTER.replace(
            f"[{_DOTS3_PARAM}]", f'["AaForCausalLM", {_DOTS3_PARAM}]'
        ),
    ),
    Case(
        "(c) platform variant: the variant's class imported in the test's body",
        lambda s: add_variant_test(
            s, "vllm.models.kimi.amd.linear", "KimiLinearForCausalLM", "amd"
        ),
        _PACKAGE_TEST,
        _PACKAGE_TEST.replace("\n\ndef test_other", _VARIANT_TEST + "\n\ndef test_other"),
    ),
    Case(
        "(c) the variant's test already there: no change (though the name is asserted)",
        lambda s: add_variant_test(
            s, "vllm.models.kimi.amd.linear", "KimiLinearForCausalLM", "amd"
        ),
        _PACKAGE_TEST.replace("\n\ndef test_other", _VARIANT_TEST + "\n\ndef test_other"),
    ),
]
