"""The smoke harness derives tiny configs for classes whose checkpoints carry what their config
class does not (issue 21: eagle3-enable targets the harness could not build on 0.34.0).

HY-V3's vLLM module reads ``expert_hidden_dim`` and ``route_norm`` (its transformers class names
the width ``moe_intermediate_size``); Step-3.5's module imports no config class, and vLLM
registers ``step3p5`` to ``Step3p7TextConfig``, which lacks the router flags the module asserts;
Param2MoE's config is remote code, so a Llama-style stand-in must carry its MoE fields.
Run in the vLLM 0.34.0 environment's python with the 0.34.0 tree first on the path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.tree.fetch import release_tree
from tests.test_smoke_hybrid_configs import probe_json

PROBE = """
import importlib, json, sys
import bot_smoke
from bot_vllm_cpu import force_cpu_platform
from transformers import AutoConfig

force_cpu_platform()
out = {}
for module_name, class_name in (
    ("vllm.model_executor.models.hy_v3", "HYV3ForCausalLM"),
    ("vllm.model_executor.models.step3p5", "Step3p5ForCausalLM"),
    ("vllm.model_executor.models.param2moe", "Param2MoEForCausalLM"),
):
    module = importlib.import_module(module_name)
    try:
        config, _derived, note = bot_smoke.tiny_config_for(module, getattr(module, class_name))
    except bot_smoke.NotChecked as why:
        out[class_name] = {"not checked": str(why)}
        continue
    fields = ("expert_hidden_dim", "route_norm", "norm_expert_weight", "use_moe_router_bias",
              "need_fp32_gate", "share_expert_dim", "hidden_size")
    out[class_name] = {
        "class": type(config).__name__,
        "note": note,
        **{name: getattr(config, name, None) for name in fields},
    }
    # What vLLM reads: the config as loaded back from the tiny checkpoint's config.json.
    config.save_pretrained(class_name)
    loaded = AutoConfig.from_pretrained(class_name)
    out[class_name]["loaded"] = {
        name: getattr(loaded, name, None)
        for name in ("rope_theta", "num_experts", "moe_shared_expert_intermediate_size")
    }
    out[class_name]["read"] = sorted(bot_smoke.attributes_read(module))
json.dump(out, sys.stdout)
"""


@pytest.mark.vllm_tree
@pytest.mark.vllm_env
def test_checkpoint_fields_and_registered_model_types(tmp_path: Path) -> None:
    configs = probe_json(PROBE, tmp_path, release_tree("0.34.0"))
    hyv3 = configs["HYV3ForCausalLM"]
    # The class's own config, with the checkpoint's expert width (shrunk) and routing flag.
    assert hyv3.get("class") == "HYV3Config", hyv3
    assert (hyv3["expert_hidden_dim"], hyv3["route_norm"]) == (32, True), hyv3
    step = configs["Step3p5ForCausalLM"]
    # No config class in its module, none named Step3p5Config: the one vLLM registers for
    # the model_type, not a Llama-style stand-in.
    assert step.get("class") == "Step3p7TextConfig", step
    assert "stand-in" not in step["note"], step
    flags = (step["norm_expert_weight"], step["use_moe_router_bias"], step["need_fp32_gate"])
    assert flags == (True, True, True), step
    assert (step["share_expert_dim"], step["hidden_size"]) == (32, 64), step
    param = configs["Param2MoEForCausalLM"]
    # Remote-code config: a Llama-style stand-in carrying the MoE fields from the size table;
    # rope_theta survives the round trip through config.json, which Llama's class folds into
    # rope_parameters.
    assert str(param.get("class")).endswith("StandInConfig"), param
    assert param["loaded"] == {
        "rope_theta": 10000.0,
        "num_experts": 4,
        "moe_shared_expert_intermediate_size": 32,
    }, param
    # Read in code; its docstring's ``config.score_function`` is not a read.
    assert "rope_theta" in param["read"] and "score_function" not in param["read"], param
