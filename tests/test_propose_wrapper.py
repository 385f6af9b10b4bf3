"""eagle3-wrapper end to end on real trees: replays of upstream's fixes, and 0.34.0's gaps."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import git
import pytest

from bot.recipes.eagle3_wrapper.recipe import findings_with_assessments
from bot.scan.findings import scan_context
from bot.tree.fetch import release_tree
from tests.cli import propose_class

pytestmark = pytest.mark.vllm_tree

MINICPM = ("MiniCPMV4_6ForConditionalGeneration", "vllm/model_executor/models/minicpmv4_6.py")
QWEN3_ASR = ("Qwen3ASRForConditionalGeneration", "vllm/model_executor/models/qwen3_asr.py")


def class_bases(source: str, name: str) -> list[str]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return [ast.unparse(base) for base in node.bases]
    raise AssertionError(f"no class {name}")


def patched_clone(tree: Path, plan_dir: Path, into: Path) -> Path:
    git.Repo.clone_from(str(tree), into, shared=True)
    repo = git.Repo(into)
    repo.git.apply(str(plan_dir / "patch.diff"))
    repo.git.commit("-qam", "apply the bot's patch", "--no-verify")
    return into


def registry_test_params(source: str) -> list[str]:
    """The architectures test_registry_supports_eagle3 is parametrized with."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "test_registry_supports_eagle3":
            decorator = node.decorator_list[0]
            assert isinstance(decorator, ast.Call)
            return list(ast.literal_eval(decorator.args[1]))
    raise AssertionError("no test_registry_supports_eagle3")


@pytest.fixture(scope="module")
def replay_0_31(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tree = release_tree("0.31.0")
    plans: dict[str, Path] = {}
    for name, _ in (MINICPM, QWEN3_ASR):
        out = tmp_path_factory.mktemp("replay") / name
        result = propose_class(tree, name, out)
        assert result.returncode == 0, result.stderr
        plans[name] = out
    return plans


@pytest.mark.parametrize("wrapper", [MINICPM, QWEN3_ASR], ids=lambda w: w[0])
def test_replay_on_0_31_declares_what_upstream_merged_in_0_32(
    replay_0_31: dict[str, Path], wrapper: tuple[str, str], tmp_path: Path
) -> None:
    name, path = wrapper
    plan = json.loads((replay_0_31[name] / "plan.json").read_text())
    assert plan["status"] == "ready"
    assert plan["recipe"] == "eagle3-wrapper"
    assert plan["class_name"] == name
    assert plan["finding"]["evidence"]["shape"] == "interface"
    clone = patched_clone(release_tree("0.31.0"), replay_0_31[name], tmp_path / "tree")
    ours = class_bases((clone / path).read_text(), name)
    upstream = class_bases((release_tree("0.32.0") / path).read_text(), name)
    before = class_bases((release_tree("0.31.0") / path).read_text(), name)
    assert "SupportsEagle3" not in before
    # The same bases as upstream's fix (MiniCPM-V 4.6 got it one place earlier upstream).
    assert sorted(ours) == sorted(upstream)
    assert ours == [*before, "SupportsEagle3"]

    # The plan's CPU tests are real node ids of the patched tree.
    registry_test = (clone / "tests/models/test_registry.py").read_text()
    params = registry_test_params(registry_test)
    registered = (clone / "vllm/model_executor/models/registry.py").read_text()
    for node_id in plan["tests"]["cpu"]:
        file, _, rest = node_id.partition("::")
        assert file == "tests/models/test_registry.py"
        assert rest.startswith("test_registry_supports_eagle3[")
        arch = rest.removeprefix("test_registry_supports_eagle3[").removesuffix("]")
        assert arch in params
        assert f'"{arch}"' in registered

    # A second run on the patched tree proposes nothing.
    again = tmp_path / "again"
    result = propose_class(clone, name, again)
    assert result.returncode == 0, result.stderr
    second = json.loads((again / "plan.json").read_text())
    assert second["status"] == "nothing-to-fix"
    assert (again / "patch.diff").read_text() == ""


def test_qwen3_asr_fix_on_the_base_covers_the_realtime_wrapper(
    replay_0_31: dict[str, Path],
) -> None:
    plan = json.loads((replay_0_31[QWEN3_ASR[0]] / "plan.json").read_text())
    assert plan["finding"]["evidence"]["covers"] == [
        "Qwen3ASRForConditionalGeneration",
        "Qwen3ASRRealtimeGeneration",
    ]
    assert sorted(plan["tests"]["cpu"]) == [
        "tests/models/test_registry.py::test_registry_supports_eagle3"
        "[Qwen3ASRForConditionalGeneration]",
        "tests/models/test_registry.py::test_registry_supports_eagle3[Qwen3ASRRealtimeGeneration]",
    ]


def test_0_34_reports_wrappers_built_every_way_the_tree_uses() -> None:
    ctx = scan_context(release_tree("0.34.0"))
    found = {f.class_name: (f, a) for f, a in findings_with_assessments(ctx)}
    shapes = {name: a.shape for name, (_, a) in found.items()}
    # self.<attr> = Cls(...), architectures=[...] through the registry, self.decoder, runtime.
    assert shapes["Cosmos3EdgeForConditionalGeneration"] == "interface"
    assert shapes["Qwen2VLForConditionalGeneration"] == "interface"
    assert shapes["MiDashengLMModel"] == "interface"
    assert shapes["KimiVLForConditionalGeneration"] == "delegate"
    assert shapes["LlavaNextForConditionalGeneration"] == "runtime"
    # One finding on the family base InternVLChatModel for the wrappers built on it.
    intern = found["InternVLChatModel"][0]
    assert list(intern.evidence.covers) == [
        "H2OVLChatModel",
        "InternVLChatModel",
        "NVLM_D_Model",
        "QianfanOCRForConditionalGeneration",
    ]
    # Rejected: a language model whose decoder does not collect aux states.
    assert "Granite4VisionForConditionalGeneration" not in found
    ready = sorted(name for name, shape in shapes.items() if shape != "runtime")
    assert len(ready) >= 20, ready


def test_0_34_delegating_plan_is_ready_and_idempotent(tmp_path: Path) -> None:
    tree = release_tree("0.34.0")
    name = "KimiVLForConditionalGeneration"
    out = tmp_path / "plan"
    result = propose_class(tree, name, out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "ready"
    assert [e["kind"] for e in plan["edits"]][0] == "declare-interface-and-delegate"
    patch = (out / "patch.diff").read_text()
    assert "+    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:" in patch
    assert "+        self.language_model.set_aux_hidden_state_layers(layers)" in patch
    clone = patched_clone(tree, out, tmp_path / "tree")
    again = tmp_path / "again"
    result = propose_class(clone, name, again)
    assert result.returncode == 0, result.stderr
    assert json.loads((again / "plan.json").read_text())["status"] == "nothing-to-fix"
    assert (again / "patch.diff").read_text() == ""


def test_0_34_runtime_wrapper_is_the_declaration_building_on_the_forwarding_core(
    tmp_path: Path,
) -> None:
    """The defaults the core-eagle3-forwarding plan writes forward to a language model chosen
    at run time: the wrapper declares the interface, nothing more, and its plan builds on that
    core plan (the guarded form stays for a tree whose defaults cannot be rewritten)."""
    tree = release_tree("0.34.0")
    name = "LlavaNextForConditionalGeneration"
    out = tmp_path / "plan"
    result = propose_class(tree, name, out)
    assert result.returncode == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["status"] == "ready"
    assert plan["edits"][0]["kind"] == "declare-interface"
    assert plan["finding"]["evidence"]["builds_on"]["recipe"] == "core-eagle3-forwarding"
    patch = (out / "patch.diff").read_text()
    assert "_require_language_model_eagle3" not in patch
    assert "+    SupportsEagle3,\n" in patch or "SupportsEagle3)" in patch
    clone = patched_clone(tree, out, tmp_path / "tree")
    again = tmp_path / "again"
    result = propose_class(clone, name, again)
    assert result.returncode == 0, result.stderr
    assert json.loads((again / "plan.json").read_text())["status"] == "nothing-to-fix"
