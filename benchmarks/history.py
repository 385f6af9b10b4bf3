"""The history exam: upstream's own EAGLE-3 fixes, replayed on the release before each one.

For every pair of consecutive cached releases (from the oldest that has ``EagleModelMixin``
through 0.30.0), the trees say which registered text-generation classes gained a working
``SupportsEagle3``: no platform variant declared it before and one does after, or the class
declared it before over a decoder that could not honour it (the ``eagle3-broken-claim`` report)
and no longer does. Older releases are left out: before ``EagleModelMixin`` each model wrote its
own capture, a form of fix the bot does not write.

Each class is then handed to the bot as a user would: ``bot scan TREE --json`` and ``bot propose
--class ARCH --repo TREE --dry-run`` on the release before (subprocesses, the installed ``bot``).
Its patch is applied to a copy of the touched files and compared with the next release on the
EAGLE-relevant facts of every class involved (the class, the decoders and wrappers either side
changed): the interface and the mixin among its bases, the EAGLE methods it defines (the
wrapper's forwarding, a guard), the capture points of its ``forward`` (where, which stream,
which residual) and the returns that hand the aux states back. Formatting, imports, loops and
tests are not compared. A class whose facts match is a match; every other is a miss with its
cause: not reported, refused (the plan's reason), or the facts that differ.

Exit status 0 whatever the score (this is a measurement); bad input is one ``bot:`` line, exit 2.

Run: ``.venv/bin/python benchmarks/history.py [--releases V ...] [--through 0.30.0]
[--only ARCH ...] [--keep DIR] [--json]``; fetch releases first with ``bot fetch VERSION``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from packaging.version import InvalidVersion, Version  # noqa: E402

from bot.config import cache_dir  # noqa: E402
from bot.errors import BotError  # noqa: E402
from bot.tree.model_registry import GENERATION_CATEGORIES  # noqa: E402

THROUGH = "0.30.0"
BOT = [sys.executable, "-m", "bot"]
MODEL_DIRS = ("vllm/model_executor/models/", "vllm/models/")
INTERFACE_NAMES = frozenset({"SupportsEagle3", "EagleModelMixin"})
COMPARED = ("bases", "methods", "captures", "returns")
NO_FACTS: dict[str, Any] = {key: [] for key in COMPARED}


# --- which classes gained the interface ---------------------------------------------------------


def cached_releases(through: str) -> list[str]:
    """Releases in the tree cache, oldest first, from the first with ``EagleModelMixin``."""
    trees = cache_dir() / "vllm-trees"
    found = []
    for path in trees.iterdir() if trees.is_dir() else []:
        try:
            version = Version(path.name)
        except InvalidVersion:
            continue
        if version <= Version(through) and _has_mixin(path):
            found.append(path.name)
    return sorted(found, key=Version)


def _has_mixin(tree: Path) -> bool:
    interfaces = tree / "vllm/model_executor/models/interfaces.py"
    try:
        return "class EagleModelMixin" in interfaces.read_text(encoding="utf-8")
    except OSError:
        return False


@dataclass(frozen=True)
class Item:
    before: str
    after: str
    arch: str
    how: str  # "declared" (no variant had it) | "claim repaired" (declared over a broken decoder)


def working_interface(tree: Path) -> dict[str, bool]:
    """Registered generation archs -> whether one variant declares SupportsEagle3 and the
    broken-claim report does not flag it (the tree read statically, as the bot reads it)."""
    from bot.recipes.interface_status import interface_status
    from bot.scan.findings import scan

    result = scan(tree)
    ctx = result.context
    broken = {f.class_name for f in result.findings if f.recipe == "eagle3-broken-claim"}
    status = {}
    for arch in sorted(
        {e.arch for e in ctx.registry.entries if e.category in GENERATION_CATEGORIES}
    ):
        variants = interface_status(ctx, arch)
        classes = {v.where.name for v in variants}
        declares = any(v.declares for v in variants)
        status[arch] = declares and not (classes & broken or arch in broken)
    return status


def exam_items(releases: list[str]) -> list[Item]:
    from bot.tree.fetch import release_tree

    items: list[Item] = []
    previous: tuple[str, dict[str, bool], set[str]] | None = None
    for version in releases:
        tree = release_tree(version)
        status = working_interface(tree)
        declared = _declaring(tree)
        if previous is not None:
            before, old, old_declared = previous
            for arch, works in status.items():
                if works and arch in old and not old[arch]:
                    how = "claim repaired" if arch in old_declared else "declared"
                    items.append(Item(before, version, arch, how))
        previous = (version, status, declared)
    return items


def _items(releases: list[str], keep: Path | None, reuse: bool) -> list[Item]:
    """The exam list, kept in ``keep/items.json`` (read back with ``reuse``)."""
    saved = keep / "items.json" if keep else None
    if reuse and saved and saved.is_file():
        data = json.loads(saved.read_text(encoding="utf-8"))
        if data.get("releases") == releases:
            return [Item(**entry) for entry in data["items"]]
    items = exam_items(releases)
    if saved:
        saved.parent.mkdir(parents=True, exist_ok=True)
        payload = {"releases": releases, "items": [asdict(i) for i in items]}
        saved.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return items


def _declaring(tree: Path) -> set[str]:
    from bot.recipes.interface_status import interface_status
    from bot.scan.findings import scan_context

    ctx = scan_context(tree)
    archs = {e.arch for e in ctx.registry.entries if e.category in GENERATION_CATEGORIES}
    return {a for a in archs if any(v.declares for v in interface_status(ctx, a))}


# --- the EAGLE-relevant facts of a file -----------------------------------------------------------


def class_facts(source: str) -> dict[str, dict[str, Any]]:
    """Per class: the EAGLE interface/mixin among its bases, its EAGLE methods, the capture
    points and aux returns of its ``forward``; formatting-free."""
    try:
        module = ast.parse(source)
    except SyntaxError:
        return {}
    facts = {}
    for node in module.body:
        if isinstance(node, ast.ClassDef):
            facts[node.name] = _facts_of(node)
    return facts


def _facts_of(cls: ast.ClassDef) -> dict[str, Any]:
    bases = sorted({ast.unparse(b).rsplit(".", 1)[-1] for b in cls.bases} & INTERFACE_NAMES)
    methods = sorted(
        n.name
        for n in cls.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and ("aux_hidden" in n.name or "eagle" in n.name.lower())
    )
    forward = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None
    )
    captures, returns = (_captures(forward), _aux_returns(forward)) if forward else ([], [])
    return {"bases": bases, "methods": methods, "captures": captures, "returns": returns}


def _captures(forward: ast.FunctionDef) -> list[str]:
    """Each capture as "<where>: <stream> (+ <residual>)": where is "before the loop" or "after
    each layer" (a capture inside a ``for``), whatever the index is named."""
    found = []
    for node, in_loop in _walk_with_loops(forward):
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        if func.endswith("_maybe_add_hidden_state") and len(node.args) >= 3:
            stream = ast.unparse(node.args[2])
            residual = ast.unparse(node.args[3]) if len(node.args) > 3 else "None"
        elif func.endswith(".append") and "aux" in func and node.args:
            value = node.args[0]
            if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
                stream, residual = ast.unparse(value.left), ast.unparse(value.right)
            else:
                stream, residual = ast.unparse(value), "None"
        else:
            continue
        where = "after each layer" if in_loop else "before the loop"
        found.append(
            f"{where}: {stream} + {residual}" if residual != "None" else f"{where}: {stream}"
        )
    return sorted(found)


def _walk_with_loops(node: ast.AST, in_loop: bool = False) -> Iterable[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        yield child, in_loop
        yield from _walk_with_loops(child, in_loop or isinstance(child, ast.For))


def _aux_returns(forward: ast.FunctionDef) -> list[str]:
    return sorted(
        {
            ast.unparse(n.value)
            for n in ast.walk(forward)
            if isinstance(n, ast.Return)
            and n.value is not None
            and any(isinstance(x, ast.Name) and "aux" in x.id for x in ast.walk(n.value))
        }
    )


# --- one class on the bot -------------------------------------------------------------------------


@dataclass
class Result:
    item: Item
    finding: str | None = None  # the bot scan's recipe for the class, if reported
    status: str | None = None  # the plan's status
    reason: str = ""
    match: bool = False
    cause: str = ""
    differences: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "item": asdict(self.item)}


def _bot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BOT, *args], capture_output=True, text=True, check=False)


def scan_findings(tree: Path) -> list[dict[str, Any]]:
    done = _bot("scan", str(tree), "--json")
    if done.returncode != 0:
        raise BotError(f"bot scan {tree} failed: {done.stderr.strip()[:300]}")
    return json.loads(done.stdout)


def judge(item: Item, findings: list[dict[str, Any]], work: Path, reuse: bool = False) -> Result:
    from bot.tree.fetch import release_tree

    started = time.monotonic()
    result = Result(item)
    before, after = release_tree(item.before), release_tree(item.after)
    mine = [f for f in findings if item.arch in f.get("architectures", [f.get("class")])]
    fixing = [f for f in mine if f.get("recipe") != "eagle3-broken-claim"]
    result.finding = ", ".join(sorted({f["recipe"] for f in mine})) or None
    # A broken claim is repaired by the plan its report names, as a user would read it.
    ready = [t for f in mine for t in ((f.get("evidence") or {}).get("fix") or {}).get("ready", [])]
    asked = ready[0] if ready and not fixing else item.arch
    if asked != item.arch:
        result.finding = f"{result.finding}, fixed by {asked}'s plan"
    plan, patch = _plan(asked, before, work / f"{item.before}-{item.arch}", reuse)
    patches = [patch]
    done: list[str] = []
    # A plan that waits for another class's plan is made after that one, as a user would.
    for depends_on in _dependencies(plan):
        if depends_on in done or len(done) > 2:
            break
        first, first_patch = _plan(depends_on, before, work / f"{item.before}-{depends_on}", reuse)
        if not first_patch.strip():
            break
        repo = _committed(before, [first_patch], work / f"chain-{item.before}-{item.arch}")
        done.append(depends_on)
        plan, patch = _plan(asked, repo, work / f"{item.before}-{item.arch}-after", reuse)
        if patch.strip():
            patches = [first_patch, patch]
            result.finding = f"{result.finding or '-'}, after {depends_on}'s plan"
    if plan is None:
        result.cause = "no plan"
        result.seconds = time.monotonic() - started
        return result
    result.status, result.reason = plan.get("status"), plan.get("reason", "")
    if not patch.strip():
        if not mine:
            result.cause = "not reported by bot scan: " + result.reason
        elif not fixing:
            result.cause = "reported only as a broken claim (no plan): " + result.reason
        else:
            result.cause = "refused: " + result.reason
        result.seconds = time.monotonic() - started
        return result
    patched = apply_patch(before, patches, work / f"applied-{item.before}-{item.arch}")
    touched = [rel for one in patches for rel in _changed_files(one)]
    result.differences = compare(item, before, after, patched, touched)
    result.match = not result.differences
    result.cause = "" if result.match else "the patch differs from upstream's"
    result.seconds = time.monotonic() - started
    return result


def _plan(arch: str, repo: Path, out: Path, reuse: bool) -> tuple[dict[str, Any] | None, str]:
    """``bot propose --class arch --dry-run`` on ``repo``: (plan.json, patch.diff)."""
    plan_file, patch_file = out / "plan.json", out / "patch.diff"
    if not (reuse and plan_file.is_file()):
        _bot("propose", "--class", arch, "--repo", str(repo), "--dry-run", "--out", str(out))
    if not plan_file.is_file():
        return None, ""
    patch = patch_file.read_text(encoding="utf-8") if patch_file.is_file() else ""
    return json.loads(plan_file.read_text(encoding="utf-8")), patch


_DEPENDS_ON = re.compile(r"the plan\(s\) it depends on: (.+)$")


def _dependencies(plan: dict[str, Any] | None) -> list[str]:
    """The classes whose plans a "not ready yet" plan names as coming first."""
    if plan is None or plan.get("status") != "nothing-to-fix":
        return []
    found = _DEPENDS_ON.search(plan.get("reason", ""))
    return re.findall(r"(\w+) \(", found.group(1)) if found else []


def _committed(tree: Path, patches: list[str], where: Path) -> Path:
    """A clone of ``tree`` with ``patches`` applied and committed (a user's checkout after
    taking the first plan)."""
    if where.exists():
        shutil.rmtree(where)
    git = ["git", "-c", "user.name=exam", "-c", "user.email=exam@localhost"]
    subprocess.run(["git", "clone", "-q", "--shared", str(tree), str(where)], check=True)
    for number, patch in enumerate(patches):
        (where / f".exam-{number}.diff").write_text(patch, encoding="utf-8")
        subprocess.run([*git, "-C", str(where), "apply", f".exam-{number}.diff"], check=True)
        (where / f".exam-{number}.diff").unlink()
    subprocess.run([*git, "-C", str(where), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(where), "commit", "-q", "-m", "first plan"], check=True)
    return where


def _changed_files(patch: str) -> list[str]:
    return [line.removeprefix("+++ b/") for line in patch.splitlines() if line.startswith("+++ b/")]


def apply_patch(tree: Path, patches: list[str], where: Path) -> Path:
    """The files ``patches`` touch, copied from ``tree`` and patched in turn with ``git apply``."""
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    for rel in {rel for patch in patches for rel in _changed_files(patch)}:
        source = tree / rel
        if source.is_file():
            (where / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, where / rel)
    subprocess.run(["git", "init", "-q", str(where)], check=True)
    for number, patch in enumerate(patches):
        name = f".exam-{number}.diff"
        (where / name).write_text(patch, encoding="utf-8")
        applied = subprocess.run(
            ["git", "-C", str(where), "apply", name], capture_output=True, text=True
        )
        if applied.returncode != 0:
            raise BotError(f"the bot's patch does not apply: {applied.stderr.strip()[:300]}")
    return where


def compare(item: Item, before: Path, after: Path, patched: Path, touched: list[str]) -> list[str]:
    """The EAGLE facts that differ between upstream's next release and the bot's patch, over
    the class's own module, the modules either side changed, and the classes in them that
    either side changed (other registered targets there are their own exam items)."""
    files = {rel for rel in touched if rel.startswith(MODEL_DIRS)}
    files |= _module_files(after, item.arch) | _module_files(before, item.arch)
    own = _class_names(after, item.arch) | _class_names(before, item.arch)
    others = _registered_classes(after) - own
    differences = []
    for rel in sorted(files):
        old = class_facts(_read(before / rel))
        upstream = class_facts(_read(after / rel))
        bot = class_facts(_read(patched / rel)) if (patched / rel).is_file() else old
        for name in sorted(set(upstream) | set(bot)):
            if name in others and name not in own:
                continue
            # a class one side does not have has no EAGLE facts there (a refactor upstream)
            theirs, ours = upstream.get(name, NO_FACTS), bot.get(name, NO_FACTS)
            was = old.get(name, NO_FACTS)
            if theirs == was and ours == was:
                continue  # neither side changed it
            for key in COMPARED:
                if theirs[key] != ours[key]:
                    differences.append(
                        f"{rel}::{name} {key}: upstream {theirs[key]}, bot {ours[key]}"
                    )
    return differences


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _registry(tree: Path) -> list[Any]:
    from bot.tree.model_registry import load_model_registry

    return [e for e in load_model_registry(tree).entries if e.category in GENERATION_CATEGORIES]


def _module_files(tree: Path, arch: str) -> set[str]:
    from bot.recipes.eagle3_analysis import locate
    from bot.scan.findings import scan_context
    from bot.tree.index import ClassRef

    ctx = scan_context(tree)
    files = set()
    for entry in _registry(tree):
        if entry.arch == arch:
            for ref in ctx.index.resolve(entry.module, entry.class_name):
                if isinstance(ref, ClassRef):
                    files.add(locate(ctx.index, ref).path)
    return files


def _class_names(tree: Path, arch: str) -> set[str]:
    return {e.class_name for e in _registry(tree) if e.arch == arch}


def _registered_classes(tree: Path) -> set[str]:
    return {e.class_name for e in _registry(tree)}


# --- the report ----------------------------------------------------------------------------------


def run(items: list[Item], work: Path, reuse: bool = False) -> list[Result]:
    from bot.tree.fetch import release_tree

    findings: dict[str, list[dict[str, Any]]] = {}
    results = []
    for item in items:
        if item.before not in findings:
            findings[item.before] = scan_findings(release_tree(item.before))
        result = judge(item, findings[item.before], work, reuse)
        print(
            f"  {item.before} -> {item.after} {item.arch}: "
            f"{'match' if result.match else 'MISS'} ({result.seconds:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        results.append(result)
    return results


def print_report(releases: list[str], results: list[Result]) -> None:
    matched = sum(r.match for r in results)
    print(f"history exam: releases {', '.join(releases)}")
    print(f"  {len(results)} classes gained a working SupportsEagle3 between consecutive releases")
    rate = f"{matched / len(results):.1%}" if results else "n/a"
    print(f"  the bot's patch on the release before matches upstream's: {matched}/{len(results)}")
    print(f"  match rate: {rate}\n")
    print("  | window | class | how | bot scan | plan | result |")
    print("  | --- | --- | --- | --- | --- | --- |")
    for r in results:
        i = r.item
        verdict = "match" if r.match else "miss"
        print(
            f"  | {i.before} → {i.after} | `{i.arch}` | {i.how} | {r.finding or '-'} | "
            f"{r.status or '-'} | {verdict} |"
        )
    misses = [r for r in results if not r.match]
    if misses:
        print("\n  misses:")
    for r in misses:
        print(f"  - {r.item.arch} ({r.item.before}): {r.cause}")
        for difference in r.differences:
            print(f"      {difference}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", nargs="*", help="releases to pair (default: cached ones)")
    parser.add_argument("--through", default=THROUGH, help=f"newest release (default {THROUGH})")
    parser.add_argument("--only", nargs="*", help="only these architectures")
    parser.add_argument("--keep", type=Path, help="keep the plans and patched files here")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: reuse the exam list and the plans a previous run kept there",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        releases = args.releases or cached_releases(args.through)
        if len(releases) < 2:
            raise BotError("the exam needs two cached releases at least (bot fetch VERSION)")
        items = _items(sorted(releases, key=Version), args.keep, args.reuse)
    except BotError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return 2
    if args.only:
        items = [i for i in items if i.arch in args.only]
    work = args.keep or Path(tempfile.mkdtemp(prefix="bot-history-"))
    try:
        results = run(items, work, args.reuse and args.keep is not None)
    except BotError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        data = {"releases": releases, "results": [r.to_dict() for r in results]}
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print_report(releases, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
