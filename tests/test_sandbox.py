"""Upstream code runs in a sandbox: it cannot read another process's environment, the real
HOME's credential files, reach the network, or write the bot's installed files.

A planted ``vllm/__init__.py`` (the probe) tries all four when it is imported and ends its
process at once: exit 3 and ``SANDBOX-PROBE leaks: [...]`` if anything worked, exit 4 and
``SANDBOX-PROBE clean`` if nothing did. Each path that runs a tree's code (``bot verify``'s
local tests, ``bot smoke``, :func:`run_upstream_code` as the engine stage uses it, and the
build steps of ``bot env`` / ``bot fetch``) is run with the probe, and once more with the
sandbox switched off (``BOT_SANDBOX=off``), where the same probe must find the leaks: the test
can fail.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import bot
from bot.cli import main
from bot.config import cache_dir
from bot.errors import BotError
from bot.gitrepo import Repo
from bot.plan import read_plan_dir, update_plan
from bot.sandbox import gpu_devices
from bot.subprocess_env import build_step, run_upstream_code
from bot.verify import VerifyOptions, verify_plan
from bot.verify.env import run_logged, vllm_env
from tests.test_token_isolation import _spy_plan
from tests.test_verify_local import commit_all

SIBLING_TOKEN = "ghp_sibling_process_token_for_the_sandbox_test"
CREDENTIAL = "https://mallory:ghp_planted_home_credential@github.com"
PROBE = """
import ctypes, glob, os, pathlib, socket, sys
_leaks = []
{escape}
for _path in glob.glob("/proc/[0-9]*/environ"):
    try:
        if {token!r}.encode() in open(_path, "rb").read():
            _leaks.append("read another process's environment")
    except OSError:
        pass
for _name in (".git-credentials", ".netrc"):
    try:
        if pathlib.Path({home!r}, _name).read_text():
            _leaks.append("read ~/" + _name)
    except OSError:
        pass
# Only a write beside the package's own files reaches it: as a user, the sandbox hides the home
# holding the package and rebuilds its path as empty directories the sandboxed process owns.
_probe = pathlib.Path({bot_dir!r}, ".sandbox-probe-" + str(os.getpid()))
try:
    _probe.write_text("x")
    _probe.unlink()
    if pathlib.Path({bot_dir!r}, "__init__.py").is_file():
        _leaks.append("wrote into the bot's installed package")
except OSError:
    pass
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    _leaks.append("reached the network")
except OSError:
    pass
{report}
"""
# Inside a sandbox (never on the host, where BOT_SANDBOX=off runs it) the probe first tries to
# break out the way the audit did as root: with capabilities, unmount the tmpfs hiding HOME and
# /tmp and the fresh /proc, and remount / read-write (holding a capability, or reading a file
# only root may read, is a leak too); then every check above looks again.
ESCAPE = """
if os.readlink("/proc/self/ns/mnt") != {host_mnt_ns!r}:
    for _line in open("/proc/self/status"):
        _key, _, _value = _line.partition(":")
        if _key in ("CapEff", "CapPrm", "CapBnd", "CapAmb") and int(_value, 16):
            _leaks.append("holds capabilities")
            break
    try:  # root-only on Debian (0640 root:shadow): readable as the kernel's uid 0
        open("/etc/shadow", "rb").close()
        _leaks.append("read a root-only file")
    except OSError:
        pass
    _libc = ctypes.CDLL(None, use_errno=True)
    for _target in ({home!r}, "/tmp", "/root", "/proc"):
        if _libc.umount2(_target.encode(), 2) == 0:  # MNT_DETACH
            _leaks.append("unmounted " + _target)
    if _libc.mount(None, b"/", None, 32 | 4096, None) == 0:  # MS_REMOUNT | MS_BIND, not MS_RDONLY
        _leaks.append("remounted / read-write")
"""
# How the probe reports: exit codes and one stderr line (every path shows one or the other).
EXIT_REPORT = """
print("SANDBOX-PROBE " + (f"leaks: {_leaks}" if _leaks else "clean"), file=sys.stderr, flush=True)
os._exit(3 if _leaks else 4)
"""


@pytest.fixture
def hostile_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """A sibling process holding a token, an operator HOME with credential files, a listening
    socket on 127.0.0.1; yields what the probe is formatted with."""
    home = tmp_path / "operator-home"
    home.mkdir()
    for name in (".git-credentials", ".netrc"):
        (home / name).write_text(CREDENTIAL + "\n")
    # The bot's shared caches (built vLLM environments) stay where they are: the sandbox hides
    # them from upstream code whatever their place.
    monkeypatch.setenv("BOT_CACHE_DIR", str(cache_dir()))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("BOT_SANDBOX", raising=False)
    sibling = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env={"PATH": os.defpath, "SIBLING_TOKEN": SIBLING_TOKEN},
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield {
            "host_mnt_ns": os.readlink("/proc/self/ns/mnt"),
            "token": SIBLING_TOKEN,
            "home": str(home),
            "bot_dir": str(Path(bot.__file__).parent),
            "port": listener.getsockname()[1],
        }
    finally:
        listener.close()
        sibling.kill()
        sibling.wait()


def probe(machine: dict[str, object], report: str = EXIT_REPORT) -> str:
    escape = ESCAPE.format(**machine)
    return PROBE.format(report=report, escape=escape, **machine)


def _verdict(output: str) -> str:
    lines = [line for line in output.splitlines() if "SANDBOX-PROBE" in line]
    assert lines, output[-2000:]
    return lines[-1].split("SANDBOX-PROBE", 1)[1].strip()


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_run_upstream_code_is_sandboxed(
    hostile_machine: dict[str, object],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sandbox: str,
) -> None:
    if sandbox == "off":
        monkeypatch.setenv("BOT_SANDBOX", "off")
    work = tmp_path / "work"
    work.mkdir()
    result = run_upstream_code(
        [sys.executable, "-c", probe(hostile_machine)], cwd=work, extra={}, timeout=120
    )
    verdict = _verdict(result.stderr)
    if sandbox == "on":
        assert (result.returncode, verdict) == (4, "clean")
    else:  # the same probe without the sandbox: every leak is there to find
        assert result.returncode == 3
        for leak in ("another process", ".git-credentials", ".netrc", "bot's installed", "network"):
            assert leak in verdict


def test_the_sandbox_still_lets_the_step_write_its_work_directory(tmp_path: Path) -> None:
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    code = "import pathlib, sys; pathlib.Path(sys.argv[1], 'r.txt').write_text('ok')"
    result = run_upstream_code(
        [sys.executable, "-c", code, str(out)], cwd=work, extra={}, timeout=60, writable=[out]
    )
    assert result.returncode == 0, result.stderr
    assert (out / "r.txt").read_text() == "ok"


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_build_step_reaches_nothing_but_the_package_index(
    hostile_machine: dict[str, object],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sandbox: str,
) -> None:
    """``bot env``'s pip install and ``bot fetch``'s pip download run here: credentials, other
    processes, the bot's files and 127.0.0.1 (a ``bot dashboard``) out of reach; the package
    index only through the proxy (tests/test_sandbox_holds.py)."""
    if sandbox == "off":
        monkeypatch.setenv("BOT_SANDBOX", "off")
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    dest = tmp_path / "venv"
    dest.mkdir()
    with build_step(
        [sys.executable, "-c", probe(hostile_machine)], extra={}, writable=[dest]
    ) as step:
        output, _ = step.communicate(timeout=120)
    verdict = _verdict(output)
    leaks = ("another process", ".git-credentials", ".netrc", "bot's installed", "network")
    found = [leak for leak in leaks if leak in verdict]
    assert found == ([] if sandbox == "on" else list(leaks))


# pytest captures the probe's stderr at the descriptor, so under pytest it reports through the
# test's failure message instead (which the JUnit report carries into the verification).
VARIABLE_REPORT = """
VERDICT = "SANDBOX-PROBE " + (f"leaks: {_leaks}" if _leaks else "clean")
"""
REPORTING_TEST = """
import vllm


def test_imports_vllm():
    raise AssertionError(vllm.VERDICT)
"""


def _probe_plan(tmp_path: Path, machine: dict[str, object], report: str = EXIT_REPORT) -> Path:
    plan_dir = _spy_plan(tmp_path, tmp_path / "unused")
    tree = Path(read_plan_dir(plan_dir).plan.repo_path)
    (tree / "vllm" / "__init__.py").write_text(probe(machine, report))
    (tree / "tests" / "test_spy.py").write_text(REPORTING_TEST.lstrip())
    plan = read_plan_dir(plan_dir).plan
    plan.base_commit = commit_all(tree)
    update_plan(plan_dir, plan)
    return plan_dir


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_bot_verify_runs_the_planted_init_in_the_sandbox(
    hostile_machine: dict[str, object],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sandbox: str,
) -> None:
    plan_dir = _probe_plan(tmp_path, hostile_machine, VARIABLE_REPORT)
    if sandbox == "off":
        monkeypatch.setenv("BOT_SANDBOX", "off")

    verification = verify_plan(plan_dir, VerifyOptions(gpu="local"))

    # The local GPU test imports vllm in a pytest process of its own and reports the verdict.
    gpu = verification.gpu.to_json()
    verdict = _verdict(json.dumps(gpu).replace("\\n", "\n"))
    assert verdict == "clean" if sandbox == "on" else verdict.startswith("leaks:")


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_bot_smoke_runs_the_planted_init_in_the_sandbox(
    hostile_machine: dict[str, object],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sandbox: str,
) -> None:
    python = vllm_env("0.34.0").python  # the harness needs torch before it imports the target
    plan_dir = _probe_plan(tmp_path, hostile_machine)
    plan = read_plan_dir(plan_dir).plan
    if sandbox == "off":
        monkeypatch.setenv("BOT_SANDBOX", "off")
    target = "vllm.model_executor.models.foo:FooForCausalLM"
    main(
        ["smoke", "--tree", plan.repo_path, "--base", plan.base_commit, "--target", target]
        + ["--python", str(python)]
    )
    out = capsys.readouterr().out
    # The harness imported the module, so vllm/__init__.py ran and exited: 4 clean, 3 leaks.
    assert f"exited with {4 if sandbox == 'on' else 3}" in out, out


def test_without_namespaces_the_run_refuses_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine without bwrap (or forbidding namespaces) refuses; BOT_SANDBOX=off opts out."""
    from bot import sandbox

    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    sandbox._probe.cache_clear()
    try:
        with pytest.raises(BotError) as refused:
            run_upstream_code([sys.executable, "-c", "pass"], cwd=tmp_path, extra={}, timeout=30)
        assert "\n" not in str(refused.value)
        assert "BOT_SANDBOX=off" in str(refused.value)
        monkeypatch.setenv("BOT_SANDBOX", "off")
        done = run_upstream_code([sys.executable, "-c", "pass"], cwd=tmp_path, extra={}, timeout=30)
        assert done.returncode == 0
    finally:
        sandbox._probe.cache_clear()


@pytest.fixture
def spy_package(tmp_path: Path, hostile_machine: dict[str, object]) -> Path:
    """A source distribution whose build runs the probe (what a hostile requirement does); pip
    shows the probe's verdict in its failure output."""
    links = tmp_path / "links"
    source = tmp_path / "botspy-1.0"
    source.mkdir(parents=True)
    (source / "setup.py").write_text(probe(hostile_machine))
    (source / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: botspy\nVersion: 1.0\n")
    links.mkdir()
    subprocess.run(
        ["tar", "-czf", str(links / "botspy-1.0.tar.gz"), "-C", str(tmp_path), "botspy-1.0"],
        check=True,
        env={"PATH": os.defpath},
    )
    return links


@pytest.fixture
def spy_index(spy_package: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip finds only the spy package, and builds it without isolation."""
    monkeypatch.setenv("PIP_FIND_LINKS", str(spy_package))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")  # pip's spelling of "no isolation"
    return spy_package


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_bot_env_builds_requirements_in_the_sandbox(
    spy_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    """``bot env``'s build step (:func:`run_logged`, every pip command of an environment
    build) on a requirement that runs code at build."""
    if sandbox == "off":
        monkeypatch.setenv("BOT_SANDBOX", "off")
    dest = tmp_path / "env"
    dest.mkdir()
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(dest / "site")]
    code, tail = run_logged([*command, "botspy==1.0"], lambda _line: None, timeout=300, dest=dest)
    assert code != 0  # the probe ends the build
    verdict = _verdict(tail)
    if sandbox == "on":
        assert verdict == "clean"
    else:
        assert "another process" in verdict and ".git-credentials" in verdict


def test_a_failed_bot_env_leaves_nothing_half_built(
    spy_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bot env`` on a release whose requirements name that package."""
    cache = tmp_path / "cache"
    tree = cache / "vllm-trees" / "9.9.9"
    (tree / "requirements").mkdir(parents=True)
    (tree / "requirements" / "common.txt").write_text("botspy==1.0\n")
    (tree / "requirements" / "cuda.txt").write_text("-r common.txt\n")
    (tree / "vllm").mkdir()
    (tree / "vllm" / "__init__.py").write_text("")
    with Repo.init(tree) as _:
        pass
    (tree / ".git" / "bot-tree-ready").write_text("9.9.9\n")
    monkeypatch.setenv("BOT_CACHE_DIR", str(cache))
    monkeypatch.setenv("BOT_ENV_TORCH", "botspy==1.0")
    assert main(["env", "9.9.9"]) == 2  # the probe's build fails, so the environment does too
    assert not (cache / "vllm-envs" / "9.9.9").exists()


def test_a_gpu_test_sees_the_gpu_device_nodes_and_nothing_else_of_dev(tmp_path: Path) -> None:
    """This machine has no GPU; /dev/fuse (absent from the sandbox's minimal /dev) stands in."""
    assert gpu_devices(("/dev/fuse", "/dev/no-such-gpu*")) == ["/dev/fuse"]
    probe = "import os, sys; sys.exit(0 if os.path.exists('/dev/fuse') else 7)"
    plain = run_upstream_code([sys.executable, "-c", probe], cwd=tmp_path, extra={}, timeout=60)
    assert plain.returncode == 7, plain.stderr
    gpu = run_upstream_code(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        extra={},
        timeout=60,
        devices=gpu_devices(("/dev/fuse",)),
    )
    assert gpu.returncode == 0, gpu.stderr
