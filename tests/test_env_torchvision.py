"""The release environment's torchvision: its Python part imports on a CPU torch (vLLM's
multimodal model files need it), its compiled ops stay absent, and the stand-in that declares
them is what makes the import work."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from bot.plan import Plan
from bot.tree.fetch import release_tree
from bot.tree.worktree import scratch_worktree
from bot.verify.env import (
    EnvInfo,
    RequirementSet,
    _is_current,
    _torchvision_ops_current,
    _write_torchvision_ops,
    read_requirements,
    vllm_env,
)
from bot.verify.runtime import RuntimeStage, model_modules

IMPORT_A_VISION_MODEL = """
import sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "without-stand-in":
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__module__ != "bot_torchvision_ops"]
try:
    import vllm.model_executor.models.qwen2_vl as module
except Exception as error:
    print("IMPORT FAILED:", type(error).__name__, error)
    raise SystemExit(0)
import torch
print("imported", module.Qwen2VLForConditionalGeneration.__name__)
try:
    torch.ops.torchvision.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)
except NotImplementedError:
    print("nms has no kernel")
"""


def run_in_env(python: Path, tree: Path, mode: str) -> str:
    result = subprocess.run(
        [str(python), "-c", IMPORT_A_VISION_MODEL, str(tree), mode],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "VLLM_TARGET_DEVICE": "cpu"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.vllm_tree
def test_torchvision_and_timm_go_in_without_their_dependencies() -> None:
    for version, pins in (
        ("0.34.0", ("torchvision==0.29.0", "timm==1.0.30")),
        ("0.23.0", ("torchvision==0.26.0", "timm==1.0.17")),
    ):
        wanted = read_requirements(release_tree(version))
        assert wanted.python_only == pins
        assert not set(pins) & set(wanted.install)
        skipped = {s.requirement.split("==")[0]: s.reason for s in wanted.skipped}
        assert "needs a CUDA torch" in skipped["torchaudio"]


@pytest.mark.vllm_tree
@pytest.mark.vllm_env
def test_a_vision_model_file_imports_and_the_ops_stay_absent() -> None:
    env = vllm_env("0.34.0")
    tree = release_tree("0.34.0")
    with_stand_in = run_in_env(env.python, tree, "with-stand-in")
    assert "imported Qwen2VLForConditionalGeneration" in with_stand_in
    assert "nms has no kernel" in with_stand_in  # declared, never implemented
    without = run_in_env(env.python, tree, "without-stand-in")
    assert "IMPORT FAILED: RuntimeError operator torchvision::nms does not exist" in without


def test_the_stand_in_is_rewritten_when_missing_or_changed(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    info = EnvInfo(
        version="0.34.0",
        path=tmp_path,
        python=tmp_path / "bin" / "python",
        python_only=["torchvision==0.29.0"],
    )
    assert not _torchvision_ops_current(info)
    _write_torchvision_ops(info.python)
    assert _torchvision_ops_current(info)
    assert (site / "bot_torchvision_ops.pth").read_text().startswith("import bot_torchvision_ops;")
    (site / "bot_torchvision_ops.py").write_text("# an older stand-in\n")
    assert not _torchvision_ops_current(info)
    without_torchvision = EnvInfo(version="0.34.0", path=tmp_path, python=info.python)
    assert _torchvision_ops_current(without_torchvision)


@pytest.mark.vllm_tree
@pytest.mark.vllm_env
def test_only_a_missing_third_party_package_excuses_a_failing_test() -> None:
    """MiDashengLM's file imports torchaudio, which no CPU environment here has: its tests
    cannot run, and verify says so instead of blaming the patch. A module missing from vLLM
    itself (what a broken patch could cause) is no excuse, and an importable module is none."""
    tree_repo = release_tree("0.34.0")
    head = git.Repo(tree_repo).head.commit.hexsha
    with scratch_worktree(tree_repo, head) as tree:
        plan = Plan(status="ready", reason="", vllm_version="0.34.0")
        stage = RuntimeStage(plan, vllm_env("0.34.0"), "")

        def why(module: str) -> str:
            stage.touched_modules = [module]
            return stage._unimportable(tree)

        assert why("vllm.model_executor.models.midashenglm") == (
            "vllm.model_executor.models.midashenglm does not import in the vLLM 0.34.0 CPU "
            "environment (no module named 'torchaudio'), so its tests cannot pass here"
        )
        assert why("vllm.model_executor.models.no_such_model") == ""
        assert why("vllm.model_executor.models.qwen2_vl") == ""


def test_model_modules_are_the_patched_files_under_vllm() -> None:
    paths = [
        "vllm/model_executor/models/qwen2_vl.py",
        "vllm/models/kimi_k3/__init__.py",
        "tests/models/registry.py",
        "docs/models.md",
    ]
    assert model_modules(paths) == ["vllm.model_executor.models.qwen2_vl", "vllm.models.kimi_k3"]


def test_a_python_only_package_the_index_lacks_does_not_rebuild_every_time(
    tmp_path: Path,
) -> None:
    """What was asked for decides whether the environment is current, not what pip managed to
    install: a pin the index cannot serve is listed as skipped, and the next `bot env` must not
    try again (and again) to top it up."""
    wanted = RequirementSet(("torch==2.13.0",), (), ("torchvision==0.99.0", "timm==1.0.30"))
    info = EnvInfo(
        version="0.34.0",
        path=tmp_path,
        python=tmp_path / "bin" / "python",
        wanted=["torch==2.13.0"],
        wanted_python_only=["torchvision==0.99.0", "timm==1.0.30"],
        python_only=["timm==1.0.30"],  # torchvision was not served
    )
    assert _is_current(info, wanted)
    asked_less = EnvInfo(**{**info.__dict__, "wanted_python_only": ["timm==1.0.30"]})
    assert not _is_current(asked_less, wanted)
