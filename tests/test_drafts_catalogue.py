"""The draft catalogue: shipped seed vs the real 0.34.0 tree, preferences, and Hub refresh.

The Hub is a small HTTP server on 127.0.0.1 speaking the routes huggingface_hub uses
(``/api/models`` and ``/<repo>/resolve/<rev>/<file>``); the real client talks to it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

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

COMMIT = "0123456789abcdef0123456789abcdef01234567"


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


# --- a fake Hugging Face Hub ----------------------------------------------------------------------

MODELS = [
    {"id": "z-lab/Foo-7B-DFlash", "cardData": {"base_model": "foo-org/Foo-7B"}},
    {"id": "someone/Foo-7B-eagle3", "cardData": {"base_model": ["foo-org/Foo-7B"]}},
    {"id": "redhat/Bar-8B-speculator.eagle3", "cardData": {}},
    {"id": "someone/dflash-notes", "cardData": {}},
]
FILES = {
    "z-lab/Foo-7B-DFlash": {"architectures": ["DFlashDraftModel"], "dflash_config": {}},
    "someone/Foo-7B-eagle3": {"architectures": ["LlamaForCausalLMEagle3"]},
    "redhat/Bar-8B-speculator.eagle3": {
        "architectures": ["Eagle3Speculator"],
        "speculators_config": {
            "algorithm": "eagle3",
            "verifier": {"name_or_path": "bar-org/Bar-8B", "architectures": ["BarForCausalLM"]},
        },
    },
    "foo-org/Foo-7B": {"architectures": ["FooForCausalLM"]},
    # someone/dflash-notes has no config.json: a 404, then a name-only guess.
}


class _FakeHub(BaseHTTPRequestHandler):
    requests: list[str] = []
    models: list[dict] = MODELS

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self._serve(send_body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._serve(send_body=True)

    def _serve(self, send_body: bool) -> None:
        url = urlparse(self.path)
        type(self).requests.append(url.path)
        if url.path == "/api/models":
            search = parse_qs(url.query).get("search", [""])[0].lower()
            models = type(self).models
            body = json.dumps([m for m in models if search in m["id"].lower()]).encode()
            return self._reply(200, body, send_body)
        if "/resolve/" in url.path:
            repo, _, rest = url.path.lstrip("/").partition("/resolve/")
            filename = rest.split("/", 1)[-1]
            if filename == "config.json" and repo in FILES:
                return self._reply(200, json.dumps(FILES[repo]).encode(), send_body, file=True)
            return self._reply(404, b'{"error": "Entry not found"}', send_body, entry_missing=True)
        self._reply(404, b'{"error": "not found"}', send_body)

    def _reply(
        self, status: int, body: bytes, send_body: bool, file: bool = False, entry_missing=False
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if file or entry_missing:
            self.send_header("X-Repo-Commit", COMMIT)
        if file:
            self.send_header("ETag", f'"{abs(hash(body))}"')
        if entry_missing:
            self.send_header("X-Error-Code", "EntryNotFound")
        self.end_headers()
        if send_body:
            self.wfile.write(body)


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    _FakeHub.requests = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_refresh_reads_configs_and_cards_and_merges_into_the_user_catalogue(
    fake_hub: str,
) -> None:
    found = {e.repo_id: e for e in refresh_from_hub(endpoint=fake_hub)}
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
    # The target's config.json was fetched once (HEAD + GET) although two drafts share it.
    assert _FakeHub.requests.count("/foo-org/Foo-7B/resolve/main/config.json") <= 2

    saved = read_catalogue_file(user_catalogue_path())
    assert {e.repo_id for e in saved} == set(found)
    catalogue = load_catalogue()
    assert catalogue.choose("FooForCausalLM").draft.repo_id == "z-lab/Foo-7B-DFlash"
    assert catalogue.choose("Qwen3NextForCausalLM").draft.repo_id == "z-lab/Qwen3-Coder-Next-DFlash"

    # A second refresh merges rather than duplicates.
    refresh_from_hub(endpoint=fake_hub)
    assert len(read_catalogue_file(user_catalogue_path())) == len(saved)


def test_cli_refresh_and_list(fake_hub: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["drafts", "refresh", "--endpoint", fake_hub]) == 0
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
    # A port nothing listens on: bind, note it, close.
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    port = server.server_address[1]
    server.server_close()
    with pytest.raises(BotError, match="cannot reach the Hugging Face Hub"):
        refresh_from_hub(endpoint=f"http://127.0.0.1:{port}")
    assert cli.main(["drafts", "refresh", "--endpoint", f"http://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bot: cannot reach the Hugging Face Hub")
    assert not user_catalogue_path().exists()


@pytest.mark.vllm_tree
def test_a_hub_card_changes_nothing_in_the_proposed_patch(
    fake_hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An issue names a Hub draft whose card points at a remote-code checkpoint.
    evil_draft, evil_target = "evil/Qwen3-Next-DFlash", "evil/Qwen3-Next-remote-code"
    monkeypatch.setitem(
        FILES, evil_draft, {"architectures": ["DFlashDraftModel"], "dflash_config": {}}
    )
    monkeypatch.setitem(
        FILES, evil_target, {"architectures": ["Qwen3NextForCausalLM"], "auto_map": {"x": "y"}}
    )
    card = {"base_model": evil_target, "trust_remote_code": True}
    monkeypatch.setattr(_FakeHub, "models", [*MODELS, {"id": evil_draft, "cardData": card}])
    issue = json.loads(EXAMPLE_ISSUE.read_text())
    issue["body"] = issue["body"].replace("/model-download/qwen3-next-eagle3-draft", evil_draft)
    issue_file = tmp_path / "issue.json"
    issue_file.write_text(json.dumps(issue))
    with monkeypatch.context() as outside:  # the vLLM tree lives in the usual cache
        outside.delenv("BOT_CACHE_DIR")
        tree = release_tree("0.23.0")

    before = propose_issue(tree, tmp_path / "before", issue_file)
    assert before.returncode == 0, before.stderr
    assert cli.main(["drafts", "refresh", "--endpoint", fake_hub]) == 0
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
