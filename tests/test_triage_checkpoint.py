"""Triage asks the checkpoint: each named target's and draft's config.json, read through the
real huggingface_hub client from the Hub stand-in (tests/hub_standin.py), decides the class;
without the Hub the class is inferred, and the issue is asked about rather than proposed wrong.

The set in ``benchmarks/triage_checkpoint/`` (issues, labels, the configs the stand-in serves) is
the one ``benchmarks/triage.py --corpus benchmarks/triage_checkpoint`` measures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.triage import (
    DEFAULT_CHECKPOINT_SET,
    HUB_FILE,
    corpus_tree,
    load_corpus,
    run_with_standin,
)
from bot.hub import Hub, HubSettings
from bot.tree.fetch import release_tree
from bot.tree.model_registry import GENERATION_CATEGORIES, load_model_registry
from bot.triage.issue import triage_issue
from bot.triage.text import hub_links
from tests.hub_standin import HubRepo, HubStandIn, repos_from_file
from tests.synthetic import make_tree

ERROR = "RuntimeError: Model does not support EAGLE3 interface"


def _issue(body: str, title: str = "[Bug]: EAGLE-3 fails at startup") -> dict:
    return {"number": 7, "title": title, "body": body, "state": "open"}


def _hub(url: str, tmp_path: Path, offline: bool = False) -> Hub:
    return Hub(HubSettings(url, offline=offline, cache=tmp_path / "hf-cache"))


@pytest.mark.vllm_tree
def test_the_checkpoint_set_is_right_with_the_hub_and_asked_without_it() -> None:
    cases = load_corpus(DEFAULT_CHECKPOINT_SET)
    assert len(cases) >= 10
    registry = load_model_registry(release_tree(corpus_tree(cases)))
    known = {e.arch for e in registry.entries if e.category in GENERATION_CATEGORIES}
    assert {c for case in cases for c in case.label.classes} <= known
    online, offline = run_with_standin(
        cases, release_tree(corpus_tree(cases)), corpus_tree(cases), DEFAULT_CHECKPOINT_SET
    )
    assert [r.case.name for r in online.rows if r.mismatch] == []
    assert online.class_accuracy()["accuracy"] == 1.0
    # Without the Hub nothing is proposed (never a wrong class), and every issue is asked about.
    assert {r.case.name: r.got.outcome for r in offline.rows} == {c.name: "ask" for c in cases}


@pytest.mark.vllm_tree
def test_the_reasons_say_where_the_class_came_from(tmp_path: Path) -> None:
    issue = json.loads((DEFAULT_CHECKPOINT_SET / "52001.json").read_text())
    tree = release_tree("0.34.0")
    with HubStandIn(repos_from_file(DEFAULT_CHECKPOINT_SET / HUB_FILE)) as standin:
        url = standin.url
        online = triage_issue(issue, tree, checkpoints=_hub(url, tmp_path))
    assert online.architectures == ("Glm4ForCausalLM",)
    assert any(
        "`acme-research/Nimbus-9B-Chat`'s config.json lists architectures `Glm4ForCausalLM`" in r
        and "the Hub at http://127.0.0.1" in r
        for r in online.reasons
    )
    # The Hub is gone and offline mode is set: the file is read from the local cache.
    cached = triage_issue(issue, tree, checkpoints=_hub(url, tmp_path, offline=True))
    assert cached.architectures == ("Glm4ForCausalLM",) and cached.outcome == "propose"
    assert any("read from the local Hub cache" in r for r in cached.reasons)
    # A fresh cache and no Hub: the class is inferred, and the reasons say so.
    empty = _hub(url, tmp_path / "other", offline=True)
    inferred = triage_issue(issue, tree, checkpoints=empty)
    assert inferred.outcome == "ask"
    assert any("HF_HUB_OFFLINE is set" in r and "inferred" in r for r in inferred.reasons)


def test_an_unreachable_hub_is_asked_once_per_process(tmp_path: Path) -> None:
    with HubStandIn() as standin:  # answers the probe with a 404: not a Hub
        standin.repos.clear()
        hub = _hub(standin.url + "/no-hub", tmp_path)
        assert hub.unreachable_because() == "it answered HTTP 404"
        for repo in ("a/b-1", "c/d-2", "e/f-3"):
            assert hub.config(repo).state == "unreachable"
        again = _hub(standin.url + "/no-hub", tmp_path)
        assert again.config("g/h-4").state == "unreachable"
    assert standin.requests == ["/no-hub/api/models"]


def test_hostile_config_values_are_never_taken_as_classes(tmp_path: Path) -> None:
    from bot.triage.checkpoint import class_names, read_checkpoint

    generation = frozenset({"Glm4ForCausalLM"})
    repos = {
        "x/listed-1": HubRepo(
            {"architectures": ["<b>Glm4</b>", 42, "Glm4ForCausalLM; rm -rf /", None]}
        ),
        "x/huge-2": HubRepo(files={"config.json": b'{"pad": "' + b"a" * (1 << 21) + b'"}'}),
        "x/list-3": HubRepo(files={"config.json": b'["Glm4ForCausalLM"]'}),
        "x/gated-4": HubRepo({"architectures": ["Glm4ForCausalLM"]}, gated=True),
    }
    with HubStandIn(repos) as standin:
        hub = _hub(standin.url, tmp_path)
        read = {r: read_checkpoint(hub, r, generation, frozenset()) for r in [*repos, "no/such-5"]}
    assert read["x/listed-1"].archs == () and read["x/listed-1"].unregistered == ()
    assert read["x/huge-2"].state == "too large"
    assert read["x/list-3"].state == "absent"
    assert read["x/gated-4"].state == "gated"
    assert read["no/such-5"].state == "absent"
    assert class_names(["A_b", "A_b", "9x", "Foo-Bar"]) == ("A_b",)


def test_hub_links_and_org_name_links_are_mentions() -> None:
    text = (
        "see [Solstice](https://huggingface.co/acme/Solstice) and https://hf.co/org/Model-2.\n"
        "not https://huggingface.co/datasets/org/data nor https://huggingface.co/spaces/a/b"
    )
    assert hub_links(text) == ["acme/Solstice", "org/Model-2"]


# --- a family with a text and a multimodal class that differ in having the interface -----------

FAMILY_TREE = {
    "model_executor/models/foo.py": """
        from torch import nn


        class FooForCausalLM(nn.Module):
            pass
        """,
    "model_executor/models/foo_vl.py": """
        from torch import nn

        from .interfaces import SupportsEagle3


        class FooForConditionalGeneration(nn.Module, SupportsEagle3):
            pass
        """,
}
FAMILY_REGISTRY = {
    "_TEXT_GENERATION_MODELS": {"FooForCausalLM": ("foo", "FooForCausalLM")},
    "_MULTIMODAL_MODELS": {
        "FooForConditionalGeneration": ("foo_vl", "FooForConditionalGeneration")
    },
}
EXAMPLES = """
_TEXT_GENERATION_EXAMPLE_MODELS = {
    "FooForCausalLM": _HfExamplesInfo("foo-org/Foo-2-7B"),
}
_MULTIMODAL_EXAMPLE_MODELS = {
    "FooForConditionalGeneration": _HfExamplesInfo("foo-org/Foo-2-VL-7B"),
}
"""
FEATURE = "[Feature]: EAGLE-3 support for acme/Foo-2-13B-Chat"
BODY = "Please add EAGLE-3 support for acme/Foo-2-13B-Chat, our fine-tune."
TEXT_ONLY, IMAGES = f"{BODY} We serve it text only.", f"{BODY} It reads images."


def _family_tree(tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "tree", FAMILY_TREE, FAMILY_REGISTRY)
    (root / "tests" / "models").mkdir(parents=True)
    (root / "tests" / "models" / "registry.py").write_text(EXAMPLES)
    return root


def test_a_name_inferred_class_whose_sibling_differs_is_asked_about(tmp_path: Path) -> None:
    root = _family_tree(tmp_path)
    with HubStandIn() as standin:  # the fine-tune is not on this Hub: its config cannot be read
        result = triage_issue(_issue(BODY, FEATURE), root, checkpoints=_hub(standin.url, tmp_path))
    assert result.architecture == "FooForCausalLM"
    assert result.outcome == "ask"
    assert "`FooForCausalLM` or `FooForConditionalGeneration`" in result.missing[0]
    assert "`acme/Foo-2-13B-Chat`'s config.json" in result.missing[0]


def test_the_config_decides_between_the_siblings(tmp_path: Path) -> None:
    root = _family_tree(tmp_path)
    repos = {"acme/Foo-2-13B-Chat": HubRepo({"architectures": ["FooForCausalLM"]})}
    with HubStandIn(repos) as standin:
        result = triage_issue(_issue(BODY, FEATURE), root, checkpoints=_hub(standin.url, tmp_path))
    assert (result.outcome, result.architectures) == ("propose", ("FooForCausalLM",))
    # Without the Hub, words saying the class's own modality decide it; the other's do not.
    with HubStandIn() as standin:
        hub = _hub(standin.url, tmp_path / "w")
        text_only = triage_issue(
            _issue(BODY + " We serve it text only.", FEATURE), root, checkpoints=hub
        )
        images = triage_issue(_issue(BODY + " It reads images.", FEATURE), root, checkpoints=hub)
    assert (text_only.outcome, text_only.architectures) == ("propose", ("FooForCausalLM",))
    assert images.outcome == "ask"


@pytest.mark.vllm_tree
def test_a_draft_named_by_a_hub_link_is_the_issues_draft(tmp_path: Path) -> None:
    # The draft catalogue knows the draft's target; the link is outside any speculative config
    # and the target is a local path, so the link is the only name that says which class.
    body = (
        "We serve /srv/models/coder-next with the DFlash draft "
        "https://huggingface.co/z-lab/Qwen3-Coder-Next-DFlash and it dies at load:\n"
        f"{ERROR}"
    )
    with HubStandIn() as standin:  # a Hub that does not know the draft: the catalogue decides
        result = triage_issue(
            _issue(body), release_tree("0.23.0"), checkpoints=_hub(standin.url, tmp_path)
        )
    assert (result.outcome, result.architectures) == ("propose", ("Qwen3NextForCausalLM",))
    assert result.draft == "z-lab/Qwen3-Coder-Next-DFlash"
    assert "the issue names the draft `z-lab/Qwen3-Coder-Next-DFlash`" in result.reasons


def test_a_password_in_the_endpoint_is_never_shown(tmp_path: Path) -> None:
    with HubStandIn() as standin:
        port = standin.url.rsplit(":", 1)[1]
        hub = _hub(f"http://user:hf_secret0123@127.0.0.1:{port}/no-hub", tmp_path)
        assert hub.shown == f"http://127.0.0.1:{port}/no-hub"
        read = hub.config("a/b-1")
    assert "hf_secret0123" not in read.source + read.why
