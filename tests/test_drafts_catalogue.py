"""The draft catalogue: shipped seed vs the real 0.34.0 tree, preferences, and Hub refresh.

The Hub is the stand-in of ``tests/hub_standin.py`` (HTTP on 127.0.0.1, the routes
huggingface_hub uses); the real client talks to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import cli
from bot.drafts import (
    CURATED,
    DraftCatalogue,
    DraftEntry,
    load_catalogue,
    read_catalogue_file,
    refresh_from_hub,
    seed_from_tree,
    shipped_entries,
    user_catalogue_path,
)
from bot.errors import BotError
from bot.tree.fetch import release_tree
from tests.cli import EXAMPLE_ISSUE, propose_issue
from tests.hub_standin import HubRepo, HubStandIn, closed_port_url


@pytest.mark.vllm_tree
def test_shipped_file_contains_the_seed_of_0_34_0() -> None:
    seed = seed_from_tree(release_tree("0.34.0"))
    shipped = shipped_entries()
    assert len(seed) > 20
    assert [e for e in seed if e not in shipped] == []


@pytest.mark.vllm_tree
def test_seed_methods_and_targets_come_from_the_registry_text() -> None:
    seed = {(e.repo_id, e.target_repo_id): e for e in seed_from_tree(release_tree("0.34.0"))}
    assert seed[("z-lab/Qwen3-4B-DFlash-b16", "Qwen/Qwen3-4B")].method == "dflash"
    angel = seed[("AngelSlim/Qwen3-8B_eagle3", "Qwen/Qwen3-8B")]
    assert (angel.method, angel.target_arch) == ("eagle3", "Qwen3ForCausalLM")
    assert (
        seed[
            ("vllm-project/EAGLE-LLaMA3-Instruct-8B", "meta-llama/Meta-Llama-3-8B-Instruct")
        ].method
        == "eagle"
    )
    assert seed[("UIUC-SSAIL/Qwen3-8B-XPress-b16", "Qwen/Qwen3-8B")].method == "xpress"
    assert seed[("Inferact/Kimi-K3-DSpark", "moonshotai/Kimi-K3")].available is False
    # Local paths and placeholder names are not public drafts.
    assert not any(e.repo_id.startswith("/") or "/" not in e.repo_id for e in seed.values())


def test_curated_qwen3_coder_next_fact_is_shipped_and_preferred() -> None:
    shipped = shipped_entries()
    fact = DraftEntry(
        repo_id="z-lab/Qwen3-Coder-Next-DFlash",
        method="dflash",
        target_repo_id="Qwen/Qwen3-Coder-Next",
        target_arch="Qwen3NextForCausalLM",
        source=CURATED[0].source,
    )
    assert fact in shipped and fact.source.startswith("curated:")
    catalogue = load_catalogue(include_user=False)
    choice = catalogue.choose("Qwen3NextForCausalLM")
    assert choice.draft == fact
    assert catalogue.target_arch_of("Qwen/Qwen3-Coder-Next") == "Qwen3NextForCausalLM"


def _entry(repo: str, method: str, arch: str, available: bool = True) -> DraftEntry:
    return DraftEntry(repo, method, "org/target", arch, "test", available)


def test_dflash_is_preferred_then_eagle3_and_unpublished_drafts_are_skipped() -> None:
    catalogue = DraftCatalogue(
        (
            _entry("a/eagle3", "eagle3", "FooForCausalLM"),
            _entry("a/dflash-hidden", "dflash", "FooForCausalLM", available=False),
            _entry("a/dspark", "dspark", "FooForCausalLM"),
        )
    )
    assert catalogue.choose("FooForCausalLM").draft.repo_id == "a/eagle3"
    both = DraftCatalogue((*catalogue.entries, _entry("a/dflash", "dflash", "FooForCausalLM")))
    assert both.choose("FooForCausalLM").draft.repo_id == "a/dflash"
    only_dspark = DraftCatalogue((_entry("a/dspark", "dspark", "BarForCausalLM"),))
    choice = only_dspark.choose("BarForCausalLM")
    assert choice.draft is None and "no published DFlash or EAGLE-3 draft" in choice.reason
    nothing = only_dspark.choose("BazForCausalLM")
    assert nothing.draft is None and "no public draft model for BazForCausalLM" in nothing.reason


# --- the Hub stand-in ----------------------------------------------------------------------------


def _repos() -> dict[str, HubRepo]:
    return {
        "z-lab/Foo-7B-DFlash": HubRepo(
            {"architectures": ["DFlashDraftModel"], "dflash_config": {}},
            card={"base_model": "foo-org/Foo-7B"},
        ),
        "someone/Foo-7B-eagle3": HubRepo(
            {"architectures": ["LlamaForCausalLMEagle3"]}, card={"base_model": ["foo-org/Foo-7B"]}
        ),
        "redhat/Bar-8B-speculator.eagle3": HubRepo(
            {
                "architectures": ["Eagle3Speculator"],
                "speculators_config": {
                    "algorithm": "eagle3",
                    "verifier": {
                        "name_or_path": "bar-org/Bar-8B",
                        "architectures": ["BarForCausalLM"],
                    },
                },
            }
        ),
        # no config.json: a 404, then a name-only guess
        "someone/dflash-notes": HubRepo(None),
        "foo-org/Foo-7B": HubRepo({"architectures": ["FooForCausalLM"]}),
    }


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    with HubStandIn(_repos()) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        yield hub


def test_refresh_reads_configs_and_cards_and_merges_into_the_user_catalogue(
    fake_hub: HubStandIn,
) -> None:
    found = {e.repo_id: e for e in refresh_from_hub(endpoint=fake_hub.url)}
    assert set(found) == {
        "z-lab/Foo-7B-DFlash",
        "someone/Foo-7B-eagle3",
        "redhat/Bar-8B-speculator.eagle3",
        "someone/dflash-notes",
    }
    dflash = found["z-lab/Foo-7B-DFlash"]
    assert (dflash.method, dflash.target_repo_id, dflash.target_arch) == (
        "dflash",
        "foo-org/Foo-7B",
        "FooForCausalLM",
    )
    assert found["someone/Foo-7B-eagle3"].method == "eagle3"
    speculator = found["redhat/Bar-8B-speculator.eagle3"]
    assert (speculator.target_repo_id, speculator.target_arch) == (
        "bar-org/Bar-8B",
        "BarForCausalLM",
    )
    assert found["someone/dflash-notes"].target_arch is None
    # The target's config.json was read once (a size check, HEAD + GET) although two drafts
    # share it.
    assert fake_hub.file_requests("foo-org/Foo-7B") <= 3

    saved = read_catalogue_file(user_catalogue_path())
    assert {e.repo_id for e in saved} == set(found)
    catalogue = load_catalogue()
    assert catalogue.choose("FooForCausalLM").draft.repo_id == "z-lab/Foo-7B-DFlash"
    assert catalogue.choose("Qwen3NextForCausalLM").draft.repo_id == "z-lab/Qwen3-Coder-Next-DFlash"

    # A second refresh merges rather than duplicates.
    refresh_from_hub(endpoint=fake_hub.url)
    assert len(read_catalogue_file(user_catalogue_path())) == len(saved)


def test_cli_refresh_and_list(fake_hub: HubStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["drafts", "refresh", "--endpoint", fake_hub.url]) == 0
    assert "found 4 draft models" in capsys.readouterr().out
    assert cli.main(["drafts", "list", "--arch", "FooForCausalLM"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    listed = ["dflash", "z-lab/Foo-7B-DFlash", "foo-org/Foo-7B", "FooForCausalLM"]
    assert [*listed, "unreviewed"] in rows
    assert cli.main(["drafts", "accept", "z-lab/Foo-7B-DFlash"]) == 0
    capsys.readouterr()
    assert cli.main(["drafts", "list", "--arch", "FooForCausalLM"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [*listed, "reviewed"] in rows
    assert {row[3] for row in rows} == {"FooForCausalLM"}


def test_offline_refresh_is_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    closed = closed_port_url()
    with pytest.raises(BotError, match="cannot reach the Hugging Face Hub"):
        refresh_from_hub(endpoint=closed)
    assert cli.main(["drafts", "refresh", "--endpoint", closed]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bot: cannot reach the Hugging Face Hub")
    assert not user_catalogue_path().exists()


@pytest.mark.vllm_tree
def test_a_hub_card_changes_nothing_in_the_proposed_patch(
    fake_hub: HubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An issue names a Hub draft whose card points at a remote-code checkpoint.
    evil_draft, evil_target = "evil/Qwen3-Next-DFlash", "evil/Qwen3-Next-remote-code"
    card = {"base_model": evil_target, "trust_remote_code": True}
    config = {"architectures": ["DFlashDraftModel"], "dflash_config": {}}
    fake_hub.repos[evil_draft] = HubRepo(config, card=card)
    fake_hub.repos[evil_target] = HubRepo(
        {"architectures": ["Qwen3NextForCausalLM"], "auto_map": {"x": "y"}}
    )
    issue = json.loads(EXAMPLE_ISSUE.read_text())
    issue["body"] = issue["body"].replace("/model-download/qwen3-next-eagle3-draft", evil_draft)
    issue_file = tmp_path / "issue.json"
    issue_file.write_text(json.dumps(issue))
    with monkeypatch.context() as outside:  # the vLLM tree lives in the usual cache
        outside.delenv("BOT_CACHE_DIR")
        tree = release_tree("0.23.0")

    before = propose_issue(tree, tmp_path / "before", issue_file)
    assert before.returncode == 0, before.stderr
    assert cli.main(["drafts", "refresh", "--endpoint", fake_hub.url]) == 0
    assert load_catalogue().find(evil_draft).target_repo_id == evil_target  # data, kept
    after = propose_issue(tree, tmp_path / "after", issue_file)
    assert after.returncode == 0, after.stderr

    patch = (tmp_path / "after" / "patch.diff").read_text()
    assert patch == (tmp_path / "before" / "patch.diff").read_text()
    assert evil_target not in patch and "trust_remote_code" not in patch


def test_list_shows_terminal_escapes_from_hub_metadata_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model card's base_model is anyone's text: an OSC/CSI sequence in it must reach the
    terminal as visible characters, never as an escape the terminal acts on."""
    from bot.drafts import DraftEntry, write_catalogue_file

    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    hostile = DraftEntry(
        repo_id="mallory/Foo-DFlash\x1b]0;owned\x07",
        method="dflash",
        target_repo_id="foo-org/Foo\x1b[2J\x1b[31m\u202e",
        target_arch="FooForCausalLM",
        source="hub",
        reviewed=False,
    )
    write_catalogue_file(user_catalogue_path(), [hostile], "test")
    assert cli.main(["drafts", "list", "--arch", "FooForCausalLM"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "mallory/Foo-DFlash\\x1b]0;owned\\x07" in out
    assert all(line.count("\t") == 4 for line in out.splitlines())
