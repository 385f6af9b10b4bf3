"""No speculative-decoding draft or MTP head is ever chosen as the class to fix, on every vLLM
release in the cache (at least 0.23.0, 0.24.0 and 0.34.0).

The issues name every draft the tree registers the ways users do (a log's resolved
architecture, a feature request, serving the draft's checkpoint by mistake, a target with its
draft attached), plus the labelled corpus. The catalogue is the shipped one plus a user layer
whose Hub entries name a draft class as their target (what `bot drafts refresh` records when a
draft repo's config lists its own architecture), so the draft's name does pull towards it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.config import cache_dir
from bot.drafts import DraftCatalogue, DraftEntry, load_catalogue
from bot.tree.fetch import release_tree
from bot.tree.known_models import load_known_models
from bot.triage.issue import triage_issue
from bot.triage.tree import SPECULATIVE, draft_archs

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "benchmarks" / "triage_corpus"
REQUIRED = ("0.23.0", "0.24.0", "0.34.0")
ERROR = "RuntimeError: Model does not support EAGLE3 interface"


def _cached_releases() -> list[str]:
    trees = cache_dir() / "vllm-trees"
    cached = {p.name for p in trees.iterdir() if (p / "vllm").is_dir()} if trees.is_dir() else set()
    return sorted(cached | set(REQUIRED), key=lambda v: tuple(int(x) for x in v.split(".")))


def _issue(body: str, title: str = "[Bug]: EAGLE-3 draft fails at startup") -> dict:
    return {"number": 1, "title": title, "body": body, "html_url": "https://x/issues/1"}


def _serve(target: str, draft: str) -> dict:
    config = json.dumps({"method": "eagle3", "model": draft, "num_speculative_tokens": 3})
    return _issue(f"```\nvllm serve {target} --speculative-config '{config}'\n{ERROR}\n```")


def _draft_issues(root: Path) -> list[dict]:
    issues = []
    for draft in sorted(draft_archs(root)):
        log = f"INFO [model.py:547] Resolved architecture: {draft}"
        issues.append(_issue(f"```\n{log}\n{ERROR}\n```"))
        issues.append(_issue(f"Please support EAGLE-3 for `{draft}`: {ERROR}", "[Feature]: eagle3"))
    for example in load_known_models(root).examples:
        speculative_model = example.kwargs.get("speculative_model")
        if example.category != SPECULATIVE or not isinstance(speculative_model, str):
            continue
        issues.append(_serve(speculative_model, speculative_model))
        if example.default:
            issues.append(_serve(example.default, speculative_model))
    return issues


def _hub_layer(root: Path) -> DraftCatalogue:
    """Hub entries naming a draft class as their target, ahead of the shipped catalogue."""
    hub = []
    for example in load_known_models(root).examples:
        speculative_model = example.kwargs.get("speculative_model")
        if example.category == SPECULATIVE and isinstance(speculative_model, str):
            hub.append(
                DraftEntry(
                    repo_id=speculative_model,
                    method="eagle3",
                    target_repo_id=example.default or None,
                    target_arch=example.arch,
                    source="hub card (unreviewed)",
                    reviewed=False,
                )
            )
    return DraftCatalogue((*hub, *load_catalogue(include_user=False).entries))


@pytest.mark.vllm_tree
@pytest.mark.parametrize("version", _cached_releases())
def test_no_draft_class_is_ever_chosen_as_the_target(version: str) -> None:
    root = release_tree(version)
    drafts = draft_archs(root)
    assert drafts, f"{version}: the tree registers no drafts?"
    catalogue = _hub_layer(root)
    corpus = [json.loads(p.read_text()) for p in sorted(CORPUS.glob("4*.json"))]
    issues = [*_draft_issues(root), *corpus]
    chosen_drafts = []
    for issue in issues:
        result = triage_issue(issue, root, catalogue)
        named = {*result.architectures, *result.alternatives}
        if result.architecture:
            named.add(result.architecture)
        if named & drafts:
            chosen_drafts.append((issue["body"][:80], sorted(named & drafts)))
    assert len(issues) > 2 * len(drafts)
    assert chosen_drafts == []


@pytest.mark.vllm_tree
def test_the_draft_name_still_confirms_the_target_family() -> None:
    # A draft named after its target (`...-speculator.eagle3`) points at the target's class.
    root = release_tree("0.34.0")
    result = triage_issue(
        _serve("/srv/models/ckpt", "RedHatAI/Phi-3.5-MoE-instruct-speculator.eagle3"), root
    )
    assert result.architectures == ("PhiMoEForCausalLM",)
    assert any("the draft's name" in r for r in result.reasons)
