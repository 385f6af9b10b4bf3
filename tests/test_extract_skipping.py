"""The index parses model files without their module-level functions (blanked line for line,
so every line number stays true), and falls back to the whole text whenever the cut might be
wrong. The facts must be exactly those of a full parse."""

from __future__ import annotations

import ast

from bot.tree import extract
from bot.tree.fetch import release_tree
from bot.tree.index import model_files, module_name
from tests.synthetic import dedent


def full_facts(source: str, module: str = "m", is_package: bool = False) -> dict:
    facts: dict = {"imports": {}, "aliases": {}, "classes": {}}
    extract._collect(ast.parse(source).body, module, is_package, facts)
    return facts


KERNELS = dedent('''
    import triton
    from .base import Base


    @triton.autotune(
        configs=[triton.Config({"BLOCK": 64})],
        key=["n"],
    )
    @triton.jit
    def kernel(
        x_ptr,
        n,
    ):
        """A kernel."""
    # a column-0 comment inside the body
        y = {
    }
        return y


    async def helper(a) -> int:
        return a


    @dataclass
    class Config(Base):
        block: int = 64

        def forward(self, x):
            return self.model(x)
''')


def test_module_level_functions_are_blanked_line_for_line() -> None:
    blanked = extract.blank_top_level_functions(KERNELS)
    assert blanked is not None
    assert len(blanked.splitlines()) == len(KERNELS.splitlines())
    assert "def kernel" not in blanked and "async def helper" not in blanked
    assert "@dataclass\nclass Config(Base):" in blanked  # a decorated class is kept
    ast.parse(blanked)  # the cut itself parses: closing brackets at column 0 were inside it
    facts = extract.extract_file(KERNELS, "m", False)
    assert facts == full_facts(KERNELS)
    config = facts["classes"]["Config"]
    assert config["line"] == KERNELS.splitlines().index("class Config(Base):") + 1
    assert config["methods"]["forward"]["passthrough"] == ["model"]


def test_a_cut_that_could_fall_inside_a_string_is_not_made() -> None:
    source = dedent('''
        def template():
            return """
        class Phantom(Base):
            pass
        """


        class Real:
            pass
    ''')
    assert extract.blank_top_level_functions(source) is None
    facts = extract.extract_file(source, "m", False)
    assert set(facts["classes"]) == {"Real"} and facts == full_facts(source)


def test_a_line_continuation_in_a_function_is_not_cut() -> None:
    source = "def f():\n    return 1 + \\\n2\n\n\nclass A:\n    pass\n"
    assert extract.blank_top_level_functions(source) is None
    assert extract.extract_file(source, "m", False) == full_facts(source)


def test_a_cut_that_breaks_the_syntax_falls_back_to_the_whole_text() -> None:
    source = "def f():\n    x = [\n1, 2]\n    return x\n\n\nclass A(B):\n    pass\n"
    assert extract.blank_top_level_functions(source) is not None  # the cut is made...
    facts = extract.extract_file(source, "m", False)  # ...does not parse, so the whole text
    assert facts == full_facts(source) and facts["classes"]["A"]["bases"] == ["B"]


def test_a_file_without_module_level_functions_is_parsed_as_it_is() -> None:
    source = "import os\n\n\nclass A:\n    def f(self):\n        pass\n"
    assert extract.blank_top_level_functions(source) is None


def test_every_file_of_0_34_0_has_the_facts_of_a_full_parse() -> None:
    root = release_tree("0.34.0")
    cut = 0
    for path in model_files(root):
        source = path.read_text(encoding="utf-8")
        module, is_package = module_name(root, path)
        cut += extract.blank_top_level_functions(source) is not None
        assert extract.extract_file(source, module, is_package) == full_facts(
            source, module, is_package
        ), path
    assert cut > 500  # the cut is really made on most files with functions


def test_the_method_walk_sees_what_ast_walk_sees_in_the_same_order() -> None:
    root = release_tree("0.34.0")
    for path in model_files(root)[::10]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        wanted = [n for n in ast.walk(tree) if type(n) in extract._METHOD_NODES]
        assert [n for n in extract._walk(tree) if type(n) in extract._METHOD_NODES] == wanted
