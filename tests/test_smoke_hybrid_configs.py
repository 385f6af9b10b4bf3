"""The smoke harness derives tiny configs for hybrid models (convolution and Mamba layers).

Their config classes derive layer types in ways the harness must respect: LFM2 lacks fields
its checkpoints carry, LFM2-MoE leaves the layer types to the checkpoint, Jamba and FalconH1
compute them from read-only properties. Run in the vLLM 0.34.0 environment's python, which has
the transformers these configs come from.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bot.verify.env import vllm_env
from bot.verify.smoke import HARNESS_DIR

PROBE = """
import json, sys
import bot_smoke
from transformers import FalconH1Config, JambaConfig, Lfm2Config, Lfm2MoeConfig

out = {}
for config_class in (Lfm2Config, Lfm2MoeConfig, JambaConfig, FalconH1Config):
    config, derived = bot_smoke.tiny_config(config_class)
    out[config_class.__name__] = {
        "layers": config.num_hidden_layers,
        "layer_types": list(getattr(config, "layer_types", None) or []),
        "block_type": list(getattr(config, "layers_block_type", None) or []),
        "note": bot_smoke.derived_layer_note(config),
    }
json.dump(out, sys.stdout)
"""


def probe_json(probe: str, cwd: Path, *path: Path) -> dict:
    """What ``probe`` prints as JSON, run by the 0.34.0 environment's python with ``path``
    (and the harness) importable."""
    env = vllm_env("0.34.0")
    result = subprocess.run(
        [str(env.python), "-c", probe],
        env={
            "PYTHONPATH": os.pathsep.join(str(p) for p in (*path, HARNESS_DIR)),
            "PATH": "/usr/bin:/bin",
            "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_NO_USAGE_STATS": "1",
        },
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


@pytest.mark.vllm_env
def test_hybrid_configs_keep_or_mix_their_layer_types(tmp_path: Path) -> None:
    configs = probe_json(PROBE, tmp_path)
    mixed = ["full_attention", "conv"] * 3
    for name in ("Lfm2Config", "Lfm2MoeConfig"):
        assert configs[name]["layer_types"] == mixed, configs[name]
        assert "profile run" in configs[name]["note"]
    # Jamba: attention every 8th layer from layer 4; the rest Mamba, as the class derives.
    jamba = configs["JambaConfig"]
    assert jamba["block_type"] == ["mamba"] * 4 + ["attention", "mamba"], jamba
    assert jamba["note"].startswith("layers_block_type as the config class derives them")
    falcon = configs["FalconH1Config"]
    assert falcon["layers"] == 6 and len(falcon["block_type"]) == 6, falcon
    assert "as the config class derives them" in falcon["note"]
