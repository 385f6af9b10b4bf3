"""A platform variant that can never be built is no variant: it cannot lack the interface."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.recipes.interface_status import already_fixed, interface_status, never_built
from bot.scan.findings import scan_context
from bot.tree.fetch import release_tree
from bot.triage.issue import triage_issue

ERROR = "RuntimeError: Model does not support EAGLE3 interface"


def test_a_class_that_can_never_be_built_is_no_platform_variant(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "class Stub:\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        raise NotImplementedError('not on this platform')\n"
        "class Checked:\n"
        "    def __init__(self, ok):\n"
        "        if not ok:\n"
        "            raise ValueError('bad config')\n"
    )
    assert never_built(tmp_path, "m.py", "Stub")
    assert not never_built(tmp_path, "m.py", "Checked")  # raises only on some input
    assert not never_built(tmp_path, "m.py", "Missing")


@pytest.mark.vllm_tree
def test_deepseek_v4_vision_is_fixed_on_every_platform_that_can_load_it() -> None:
    ctx = scan_context(release_tree("0.34.0"))
    arch = "DeepseekV4ForConditionalGeneration"
    assert [s.where.path for s in interface_status(ctx, arch)] == [
        "vllm/models/deepseek_v4/common/vl_model.py"
    ]
    assert already_fixed(ctx, arch)
    body = (
        "vllm serve deepseek-ai/DeepSeek-V4-Flash-Vision-Exp --limit-mm-per-prompt "
        '\'{"image": 2}\' --speculative-config \'{"method": "eagle3", "model": "/d"}\'\n'
        f"{ERROR}"
    )
    issue = {"number": 9, "title": "[Bug]: eagle3 with images", "body": body, "state": "open"}
    result = triage_issue(issue, release_tree("0.34.0"))
    assert result.outcome == "silent"
    assert any(r.startswith("not ours: already fixed") for r in result.reasons)
