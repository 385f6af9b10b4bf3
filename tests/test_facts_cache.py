"""The facts store: a run reads the keys it asks for, writes what it parsed, and entries no
tree uses any more are pruned (issue 24, item 5: scan cost must not grow with history)."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest

from bot.tree import facts_cache


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))


def _stored_keys(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        keys = {key for (key,) in db.execute("SELECT key FROM facts")}
    db.close()
    return keys


def _tree(tmp_path: Path, name: str) -> Path:
    tree = tmp_path / name
    tree.mkdir()
    return tree


def test_a_run_reads_only_its_keys_and_shares_entries_between_trees(tmp_path: Path) -> None:
    old, new = _tree(tmp_path, "0.23.0"), _tree(tmp_path, "0.34.0")
    with facts_cache.open_store("facts", 1) as store:
        store.put({"a": {"x": 1}, "b": {"x": 2}})
        store.record_tree(old, ["a", "b"])
        store.put({"c": {"x": 3}})  # 0.34.0 shares `b` with 0.23.0: only `c` is parsed
        store.record_tree(new, ["b", "c"])
    with facts_cache.open_store("facts", 1) as store:
        assert store.get(["b", "c", "missing"]) == {"b": {"x": 2}, "c": {"x": 3}}
        assert store.get([]) == {}


def test_entries_no_tree_uses_are_pruned(tmp_path: Path) -> None:
    old, new = _tree(tmp_path, "0.23.0"), _tree(tmp_path, "0.34.0")
    with facts_cache.open_store("facts", 1) as store:
        store.put({"a": 1, "b": 2})
        store.record_tree(old, ["a", "b"])
        store.put({"c": 3})
        store.record_tree(new, ["b", "c"])
        path = store.path
    assert _stored_keys(path) == {"a", "b", "c"}
    with facts_cache.open_store("facts", 1) as store:  # 0.34.0 changed: its `c` is gone
        store.put({"d": 4})
        store.record_tree(new, ["b", "d"])
    assert _stored_keys(path) == {"a", "b", "d"}
    old.rmdir()  # a tree that no longer exists keeps nothing alive
    with facts_cache.open_store("facts", 1) as store:
        store.record_tree(new, ["d"])
    assert _stored_keys(path) == {"d"}


def test_a_large_store_of_other_trees_is_not_read(tmp_path: Path) -> None:
    # Entries of other trees are never decoded: a planted value there would be refused only
    # if it were read, and a run over this tree must not see (or pay for) it.
    mine, other = _tree(tmp_path, "mine"), _tree(tmp_path, "other")
    with facts_cache.open_store("facts", 1, lambda v: isinstance(v, int)) as store:
        store.put({"k": 1})
        store.record_tree(mine, ["k"])
        store.record_tree(other, ["planted"])
        path = store.path
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO facts VALUES (?, ?)", ("planted", pickle.dumps(ValueError("x"))))
    db.close()
    with facts_cache.open_store("facts", 1, lambda v: isinstance(v, int)) as store:
        assert store.get(["k"]) == {"k": 1}
        assert store.get(["planted"]) == {}  # read: refused, store rebuilt
    assert not path.exists() or _stored_keys(path) == set()


def test_a_store_that_cannot_be_written_only_costs_time(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    with facts_cache.open_store("facts", 1) as store:
        store.put({"a": 1})
        store.record_tree(tmp_path, ["a"])
        assert store.get(["a"]) == {}


def test_a_remembered_answer_is_computed_once_per_content_and_refused_when_damaged(
    tmp_path: Path,
) -> None:
    """facts_cache.remembered (the loaders, the registry, the protocol's defaults, the guard):
    computed once per content (this process, then the store), one answer kept per tree, and a
    damaged answer is recomputed rather than believed."""
    tree, computed = _tree(tmp_path, "0.34.0"), []

    def ask(content: bytes) -> object:
        def compute() -> list[int]:
            computed.append(content)
            return [len(content)]

        return facts_cache.remembered("toy", 1, tree, content, compute, valid)

    def valid(value: object) -> bool:
        return isinstance(value, list)

    assert ask(b"abc") == [3] and ask(b"abc") == [3]
    facts_cache._REMEMBERED.clear()  # a new process: the store answers
    assert ask(b"abc") == [3]
    assert computed == [b"abc"]
    assert ask(b"abcd") == [4]  # the tree changed: its old answer is pruned
    path = facts_cache.cache_file("toy", 1)
    assert _stored_keys(path) == {facts_cache.content_key(b"abcd")}
    with sqlite3.connect(path) as db:
        db.execute("UPDATE facts SET value = ?", (pickle.dumps("garbage"),))
    db.close()
    facts_cache._REMEMBERED.clear()
    assert ask(b"abcd") == [4]  # refused, the store rebuilt, computed again
    assert computed == [b"abc", b"abcd", b"abcd"]


def _key_rows(tree: Path) -> dict[str, str]:
    with sqlite3.connect(facts_cache.cache_file("facts", 1)) as db:
        query = "SELECT path, key FROM file_keys WHERE tree = ?"
        rows = dict(db.execute(query, (str(tree),)).fetchall())
    db.close()
    return rows


def _plant_key(tree: Path, path: str, key: str) -> None:
    with sqlite3.connect(facts_cache.cache_file("facts", 1)) as db:
        db.execute(
            "UPDATE file_keys SET key = ? WHERE tree = ? AND path = ?", (key, str(tree), path)
        )
    db.close()


def test_a_file_whose_stat_is_unchanged_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm scan hashes no file whose stat (inode, size, times) is the one recorded with its
    key; a changed file, or a run that reuses nothing (--no-cache), reads the bytes again."""
    monkeypatch.setattr(facts_cache, "_SETTLED_NS", 0)  # these files were written just now
    tree = _tree(tmp_path, "0.34.0")
    (tree / "pkg").mkdir()
    a, b = tree / "pkg" / "a.py", tree / "pkg" / "b.py"
    a.write_bytes(b"class A: pass\n")
    b.write_bytes(b"class B: pass\n")

    def keys(reuse: bool = True) -> list[str]:
        with facts_cache.open_store("facts", 1) as store:
            return store.content_keys(tree, [a, str(b)], reuse=reuse)

    real = [facts_cache.content_key(a.read_bytes()), facts_cache.content_key(b.read_bytes())]
    assert keys() == real
    assert _key_rows(tree) == {"pkg/a.py": real[0], "pkg/b.py": real[1]}
    _plant_key(tree, "pkg/a.py", "planted")  # what a read would contradict
    assert keys() == ["planted", real[1]]  # not read: its stat is what was recorded
    assert keys(reuse=False) == real  # --no-cache reads every file, and records it afresh
    assert _key_rows(tree)["pkg/a.py"] == real[0]
    _plant_key(tree, "pkg/a.py", "planted")
    a.write_bytes(b"class A(B): pass\n")  # edited: its stat changed
    assert keys() == [facts_cache.content_key(a.read_bytes()), real[1]]


def test_a_file_changed_just_now_is_not_recorded_with_its_key(tmp_path: Path) -> None:
    """A second write within the same tick of the file system's clock could leave its stat
    as it was, so a file changed in the last seconds is read again next time."""
    tree = _tree(tmp_path, "0.34.0")
    fresh = tree / "fresh.py"
    fresh.write_bytes(b"x = 1\n")
    with facts_cache.open_store("facts", 1) as store:
        assert store.content_keys(tree, [fresh]) == [facts_cache.content_key(b"x = 1\n")]
    assert _key_rows(tree) == {}
