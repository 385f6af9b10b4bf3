"""The scan's edge cases on small synthetic trees: each case is one model shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.pipeline import scan
from tests.cli import run_bot
from tests.synthetic import READY_DECODER, make_tree

TEXT = "_TEXT_GENERATION_MODELS"
HEADER = """
from torch import nn

from .interfaces import EagleModelMixin, SupportsEagle3, SupportsPP
"""


def causal_lm(name: str, decoder: str, bases: str = "nn.Module, SupportsPP") -> str:
    return f"""
class {name}({bases}):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = {decoder}(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
"""


def findings_for(tmp_path: Path, models: dict[str, str], registry: dict) -> list[dict]:
    make_tree(tmp_path, models, registry)
    return [f.to_json() for f in scan(tmp_path, use_cache=False).findings]


def test_reports_a_class_whose_decoder_is_ready(tmp_path: Path) -> None:
    source = (
        HEADER + READY_DECODER.format(name="FooModel") + causal_lm("FooForCausalLM", "FooModel")
    )
    found = findings_for(
        tmp_path,
        {"model_executor/models/foo.py": source},
        {TEXT: {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    assert [(f["recipe"], f["class"], f["path"]) for f in found] == [
        ("eagle3-interface", "FooForCausalLM", "vllm/model_executor/models/foo.py")
    ]
    evidence = found[0]["evidence"]
    assert evidence["decoder"]["name"] == "FooModel"
    assert evidence["mixin"]["name"] == "FooModel"
    assert evidence["aux"]["helper_lines"], "forward lines that collect aux states"
    assert found[0]["line"] == evidence["class"]["line"]


def test_no_change_when_already_declared(tmp_path: Path) -> None:
    source = (
        HEADER
        + READY_DECODER.format(name="FooModel")
        + causal_lm("FooForCausalLM", "FooModel", "nn.Module, SupportsPP, SupportsEagle3")
    )
    found = findings_for(
        tmp_path,
        {"model_executor/models/foo.py": source},
        {TEXT: {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    assert found == []


def test_decoder_without_the_mixin_is_not_an_interface_gap(tmp_path: Path) -> None:
    # It collects aux states by hand, but the interface's default methods assert on the mixin.
    decoder = """
class BarModel(nn.Module):
    aux_hidden_state_layers = ()

    def forward(self, input_ids, positions):
        aux_hidden_states = []
        for idx, layer in enumerate(self.layers):
            if idx in self.aux_hidden_state_layers:
                aux_hidden_states.append(input_ids)
        return input_ids, aux_hidden_states
"""
    source = HEADER + decoder + causal_lm("BarForCausalLM", "BarModel")
    found = findings_for(
        tmp_path,
        {"model_executor/models/bar.py": source},
        {TEXT: {"BarForCausalLM": ("bar", "BarForCausalLM")}},
    )
    assert not [f for f in found if f["recipe"] == "eagle3-interface"]
    # A pre-mixin capture is eagle3-enable's to migrate; this loop never calls its layer, so it
    # is reported for a human, never as fixable.
    (enable,) = found
    assert enable["recipe"] == "eagle3-enable"
    assert enable["evidence"]["refused"].startswith("needs a human")


def test_mixin_without_aux_collection_is_not_reported(tmp_path: Path) -> None:
    decoder = """
class BazModel(nn.Module, EagleModelMixin):
    def forward(self, input_ids, positions):
        return input_ids
"""
    source = HEADER + decoder + causal_lm("BazForCausalLM", "BazModel")
    found = findings_for(
        tmp_path,
        {"model_executor/models/baz.py": source},
        {TEXT: {"BazForCausalLM": ("baz", "BazForCausalLM")}},
    )
    assert found == []


def test_a_forward_that_reworks_the_decoder_output_is_not_reported(tmp_path: Path) -> None:
    # With aux layers set the decoder returns a tuple; this forward would break on it.
    target = """
class PostForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = PostModel(vllm_config=vllm_config, prefix=prefix)

    def forward(self, input_ids, positions):
        hidden_states = self.model(input_ids, positions)
        hidden_states = self.final_norm(hidden_states)
        return hidden_states
"""
    source = HEADER + READY_DECODER.format(name="PostModel") + target
    found = findings_for(
        tmp_path,
        {"model_executor/models/post.py": source},
        {TEXT: {"PostForCausalLM": ("post", "PostForCausalLM")}},
    )
    assert found == []
    passing = source.replace(
        "        hidden_states = self.final_norm(hidden_states)\n", ""
    )  # the same model handing the output straight back is a gap
    (tmp_path / "vllm/model_executor/models/post.py").write_text(passing)
    assert [f.class_name for f in scan(tmp_path, use_cache=False).findings] == ["PostForCausalLM"]


def test_pooling_models_are_never_reported(tmp_path: Path) -> None:
    source = (
        HEADER.replace("SupportsPP", "SupportsPP, VllmModelForPooling")
        + READY_DECODER.format(name="EmbModel")
        + causal_lm("EmbForCausalLM", "EmbModel")
        + causal_lm("EmbPooler", "EmbModel", "nn.Module, VllmModelForPooling")
    )
    found = findings_for(
        tmp_path,
        {"model_executor/models/emb.py": source},
        {
            "_EMBEDDING_MODELS": {"EmbForCausalLM": ("emb", "EmbForCausalLM")},
            "_REWARD_MODELS": {"EmbReward": ("emb", "EmbForCausalLM")},
            TEXT: {"EmbPooler": ("emb", "EmbPooler")},
        },
    )
    assert found == []


def test_a_class_flagged_as_pooling_is_never_reported(tmp_path: Path) -> None:
    # No pooling base, only the class flag; its unflagged twin is a gap.
    flagged = causal_lm("FlagForCausalLM", "FlagModel").replace(
        "    def __init__", "    is_pooling_model = True\n\n    def __init__", 1
    )
    source = (
        HEADER
        + READY_DECODER.format(name="FlagModel")
        + flagged
        + causal_lm("TwinForCausalLM", "FlagModel")
    )
    found = findings_for(
        tmp_path,
        {"model_executor/models/flag.py": source},
        {
            TEXT: {
                "FlagForCausalLM": ("flag", "FlagForCausalLM"),
                "TwinForCausalLM": ("flag", "TwinForCausalLM"),
            }
        },
    )
    assert [f["class"] for f in found] == ["TwinForCausalLM"]


def test_a_class_setting_the_flag_itself_declares_the_interface(tmp_path: Path) -> None:
    flagged = causal_lm("FlagForCausalLM", "FlagModel").replace(
        "    def __init__", "    supports_eagle3 = True\n\n    def __init__", 1
    )
    unflagged = causal_lm("OffForCausalLM", "FlagModel").replace(
        "    def __init__", "    supports_eagle3 = False\n\n    def __init__", 1
    )
    found = findings_for(
        tmp_path,
        {
            "model_executor/models/flag.py": HEADER
            + READY_DECODER.format(name="FlagModel")
            + flagged
            + unflagged
        },
        {
            TEXT: {
                "FlagForCausalLM": ("flag", "FlagForCausalLM"),
                "OffForCausalLM": ("flag", "OffForCausalLM"),
            }
        },
    )
    assert [f["class"] for f in found] == ["OffForCausalLM"]


def test_the_sibling_named_in_the_evidence_has_the_closest_decoder_name(tmp_path: Path) -> None:
    # No sibling shares FooModel, its lineage or its module; FooxModel's name is closest
    # (BarModel's class name, FoForCausalLM, is closer to FooModel than ZedForCausalLM is:
    # ranking must go by the decoders' names, not the classes').
    declared = "nn.Module, SupportsPP, SupportsEagle3"
    models = {
        "model_executor/models/foo.py": HEADER
        + READY_DECODER.format(name="FooModel")
        + causal_lm("FooForCausalLM", "FooModel"),
        "model_executor/models/foox.py": HEADER
        + READY_DECODER.format(name="FooxModel")
        + causal_lm("ZedForCausalLM", "FooxModel", declared),
        "model_executor/models/bar.py": HEADER
        + READY_DECODER.format(name="BarModel")
        + causal_lm("FoForCausalLM", "BarModel", declared),
    }
    registry = {
        TEXT: {
            "FooForCausalLM": ("foo", "FooForCausalLM"),
            "ZedForCausalLM": ("foox", "ZedForCausalLM"),
            "FoForCausalLM": ("bar", "FoForCausalLM"),
        }
    }
    found = findings_for(tmp_path, models, registry)
    assert [f["class"] for f in found] == ["FooForCausalLM"]
    sibling = found[0]["evidence"]["sibling"]
    assert sibling["name"] == "ZedForCausalLM"
    assert sibling["decoder"] == "FooxModel"
    assert sibling["kinship"] == "a decoder that also takes EagleModelMixin and taps aux states"


def test_resolves_aliases_reexports_and_absolute_imports(tmp_path: Path) -> None:
    decoder_module = (
        "from torch import nn\n"
        "from vllm.model_executor.models.interfaces import EagleModelMixin as Tap\n"
        + READY_DECODER.format(name="CoreModel").replace("EagleModelMixin", "Tap")
    )
    reexport = "from .core import CoreModel as PublicModel\n"
    target = (
        "from torch import nn\n"
        "from . import shim\n"
        "from .interfaces import SupportsPP\n" + causal_lm("QuxForCausalLM", "shim.PublicModel")
    )
    found = findings_for(
        tmp_path,
        {
            "model_executor/models/core.py": decoder_module,
            "model_executor/models/shim.py": reexport,
            "model_executor/models/qux.py": target,
        },
        {TEXT: {"QuxForCausalLM": ("qux", "QuxForCausalLM")}},
    )
    assert [f["class"] for f in found] == ["QuxForCausalLM"]
    assert found[0]["evidence"]["decoder"]["path"] == "vllm/model_executor/models/core.py"


def test_factory_method_and_class_attribute_constructions(tmp_path: Path) -> None:
    source = (
        HEADER
        + READY_DECODER.format(name="AModel")
        + """
class FactoryForCausalLM(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = self._init_model(vllm_config=vllm_config)

    def _init_model(self, vllm_config):
        return AModel(vllm_config=vllm_config)


class AttrForCausalLM(nn.Module):
    model_cls = AModel

    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = self.model_cls(vllm_config=vllm_config)
"""
    )
    found = findings_for(
        tmp_path,
        {"model_executor/models/a.py": source},
        {
            TEXT: {
                "FactoryForCausalLM": ("a", "FactoryForCausalLM"),
                "AttrForCausalLM": ("a", "AttrForCausalLM"),
            }
        },
    )
    assert sorted(f["class"] for f in found) == ["AttrForCausalLM", "FactoryForCausalLM"]


def test_platform_package_variants_each_reported(tmp_path: Path) -> None:
    variant = (
        "from torch import nn\n"
        "from vllm.model_executor.models.interfaces import EagleModelMixin, SupportsEagle3\n"
        + READY_DECODER.format(name="KModel")
    )
    nvidia = variant + causal_lm("KForCausalLM", "KModel", "nn.Module, SupportsEagle3")
    amd = variant + causal_lm("KForCausalLM", "KModel")
    init = """
from vllm.platforms import current_platform

if current_platform.is_rocm():
    from .amd.model import KForCausalLM
else:
    from .nvidia.model import KForCausalLM
"""
    found = findings_for(
        tmp_path,
        {
            "models/__init__.py": "",
            "models/k/__init__.py": init,
            "models/k/nvidia/__init__.py": "",
            "models/k/nvidia/model.py": nvidia,
            "models/k/amd/__init__.py": "",
            "models/k/amd/model.py": amd,
        },
        {TEXT: {"KForCausalLM": ("vllm.models.k", "KForCausalLM")}},
    )
    assert [(f["class"], f["path"]) for f in found] == [
        ("KForCausalLM", "vllm/models/k/amd/model.py")
    ]
    sibling = found[0]["evidence"]["sibling"]
    assert sibling["path"] == "vllm/models/k/nvidia/model.py"


def test_multimodal_wrapper_is_its_own_recipe(tmp_path: Path) -> None:
    source = (
        HEADER.replace("SupportsPP", "SupportsPP, SupportsMultiModal")
        + READY_DECODER.format(name="LmModel")
        + causal_lm("LmForCausalLM", "LmModel", "nn.Module, SupportsEagle3")
        + """
class LmVLForConditionalGeneration(nn.Module, SupportsMultiModal):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.language_model = LmForCausalLM(vllm_config=vllm_config)

    def forward(self, input_ids, positions):
        return self.language_model.model(input_ids, positions)
"""
    )
    found = findings_for(
        tmp_path,
        {"model_executor/models/lm.py": source},
        {
            TEXT: {"LmForCausalLM": ("lm", "LmForCausalLM")},
            "_MULTIMODAL_MODELS": {
                "LmVLForConditionalGeneration": ("lm", "LmVLForConditionalGeneration")
            },
        },
    )
    assert [(f["recipe"], f["class"]) for f in found] == [
        ("eagle3-wrapper", "LmVLForConditionalGeneration")
    ]


def test_unparseable_file_is_reported_and_skipped(tmp_path: Path) -> None:
    source = (
        HEADER + READY_DECODER.format(name="FooModel") + causal_lm("FooForCausalLM", "FooModel")
    )
    make_tree(
        tmp_path,
        {
            "model_executor/models/foo.py": source,
            "model_executor/models/broken.py": "class Broken(:\n",
            # Module-level functions are blanked before parsing (bot/tree/extract.py), so an
            # error inside one is not seen: the file's classes are indexed as usual.
            "model_executor/models/odd.py": "def odd(:\n    pass\n\n\nclass Odd:\n    pass\n",
        },
        {TEXT: {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    result = scan(tmp_path, use_cache=False)
    assert [f.class_name for f in result.findings] == ["FooForCausalLM"]
    assert len(result.problems) == 1
    assert result.problems[0].startswith("vllm/model_executor/models/broken.py: does not parse")
    assert "Odd" in result.context.index.modules["vllm.model_executor.models.odd"].facts["classes"]


def test_cli_rejects_a_path_that_is_not_a_vllm_tree(tmp_path: Path) -> None:
    result = run_bot("scan", str(tmp_path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "is not a vLLM tree" in result.stderr
    assert "Traceback" not in result.stderr
    missing = run_bot("scan", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such directory" in missing.stderr


def test_cli_json_defaults_to_the_current_directory(tmp_path: Path) -> None:
    source = (
        HEADER + READY_DECODER.format(name="FooModel") + causal_lm("FooForCausalLM", "FooModel")
    )
    make_tree(
        tmp_path,
        {
            "model_executor/models/foo.py": source,
            "model_executor/models/broken.py": "class (:\n",
        },
        {TEXT: {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    result = run_bot("scan", "--json", "--no-cache", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    findings = json.loads(result.stdout)
    assert {"recipe", "class", "path", "line", "evidence"} <= set(findings[0])
    assert findings[0]["path"] == "vllm/model_executor/models/foo.py"
    assert "broken.py" in result.stderr  # reported, not fatal
    matrix = json.loads(run_bot("scan", "--matrix", cwd=tmp_path).stdout)
    assert [row["class"] for row in matrix["include"]] == ["FooForCausalLM"]
    table = run_bot("scan", cwd=tmp_path)
    assert "FooForCausalLM" in table.stdout and "eagle3-interface" in table.stdout


@pytest.mark.parametrize("edit", ["touch-one-file"])
def test_cache_reparses_only_changed_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    source = (
        HEADER + READY_DECODER.format(name="FooModel") + causal_lm("FooForCausalLM", "FooModel")
    )
    tree = make_tree(
        tmp_path / "tree",
        {"model_executor/models/foo.py": source},
        {TEXT: {"FooForCausalLM": ("foo", "FooForCausalLM")}},
    )
    first = scan(tree)
    assert first.files_parsed == first.files_indexed > 0
    assert scan(tree).files_parsed == 0
    (tree / "vllm/model_executor/models/foo.py").write_text(source + "\nX = 1\n")
    assert scan(tree).files_parsed == 1
    assert scan(tree, use_cache=False).files_parsed == first.files_indexed
