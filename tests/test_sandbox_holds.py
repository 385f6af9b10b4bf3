"""The audit's findings against the sandbox, each rerun as a test (issue 36).

A hostile vLLM tree, a hostile source distribution and a hostile build step try what the audit
did: plant a ``.git`` and a ``.gitattributes`` filter where the bot runs git next (F1), poison
the shared pip cache (L1), make the bot write through a link (L2), replace the GPU runner's
JUnit report by a link (L4); and the GPU runner's relative ``--junit`` (I1), ``bot verify``
without a sandbox (I3). Each test passes only when the finding is held; the escapes of root
itself (F2) are in tests/test_sandbox.py's probe, which every sandboxed path runs.
"""

from __future__ import annotations

import os
import socket
import socketserver
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bot import sandbox
from bot.cli import main
from bot.errors import BotError
from bot.plan import read_plan_dir, update_plan
from bot.subprocess_env import build_step
from bot.verify import VerifyOptions, verify_plan
from bot.verify.env import EnvInfo, _write_torchvision_ops, write_manifest
from tests.hub_standin import HubRepo, HubStandIn
from tests.test_token_isolation import _spy_plan
from tests.test_verify_local import commit_all

# A filter git runs on every file it reads or writes in a repository that declares it: the
# attacker's code, run by whoever runs git there. It leaves a mark, then passes data through.
FILTER_CONFIG = """[core]
\trepositoryformatversion = 0
\tbare = false
[filter "planted"]
\tclean = "echo ran >> {mark}; cat"
\tsmudge = "echo ran >> {mark}; cat"
\trequired = true
"""
PLANTING_TEST = '''
import pathlib


def test_plants_a_git_filter():
    """Runs in the tree (its cwd) and makes it a repository whose filter runs the mark."""
    tree = pathlib.Path.cwd()
    planted = tree / ".planted-git"
    for sub in ("objects", "refs/heads"):
        (planted / sub).mkdir(parents=True)
    (planted / "HEAD").write_text("ref: refs/heads/main\\n")
    (planted / "config").write_text({config!r})
    (tree / ".git").unlink()
    (tree / ".git").write_text(f"gitdir: {{planted}}\\n")
    (tree / ".gitattributes").write_text("* filter=planted\\n")
'''
NODE = "tests/test_spy.py::test_imports_vllm"


def _planting_plan(tmp_path: Path, mark: Path) -> Path:
    """The synthetic tree's own test (the plan's GPU test) plants the filter when it runs."""
    plan_dir = _spy_plan(tmp_path, tmp_path / "unused")
    tree = Path(read_plan_dir(plan_dir).plan.repo_path)
    (tree / "vllm" / "__init__.py").write_text("")
    test = PLANTING_TEST.format(config=FILTER_CONFIG.format(mark=mark))
    (tree / "tests" / "test_spy.py").write_text(
        test.replace("test_plants_a_git_filter", "test_imports_vllm")
    )
    plan = read_plan_dir(plan_dir).plan
    plan.base_commit = commit_all(tree)
    update_plan(plan_dir, plan)
    return plan_dir


def test_a_test_in_the_tree_cannot_plant_a_git_filter_for_verify(tmp_path: Path) -> None:
    """F1: the fail-before GPU test runs in the scratch tree; then verify applies the patch
    there with git. A test that could write the tree would turn that ``git apply`` into its
    own code run as the operator, outside the sandbox."""
    mark = tmp_path / "filter-ran"
    plan_dir = _planting_plan(tmp_path, mark)

    verification = verify_plan(plan_dir, VerifyOptions(gpu="local", before=True, journal=False))

    assert not mark.exists(), "git ran the planted filter as the operator"
    # The planting test ran, and failed: the tree is read-only to it.
    assert "Read-only file system" in verification.gpu.log_excerpt, verification.gpu
    assert verification.checks[0].name == "apply" and verification.checks[0].passed is True


def _sdist(tmp_path: Path, setup_py: str, version: str = "9.9.9") -> Path:
    """A find-links directory holding ``vllm-<version>.tar.gz`` with this ``setup.py``."""
    source = tmp_path / "sdist" / f"vllm-{version}"
    (source / "vllm").mkdir(parents=True)
    (source / "vllm" / "__init__.py").write_text("")
    (source / "setup.py").write_text(setup_py)
    (source / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    links = tmp_path / "links"
    links.mkdir()
    archive = links / f"vllm-{version}.tar.gz"
    subprocess.run(
        ["tar", "-czf", str(archive), "-C", str(source.parent), source.name],
        check=True,
        env={"PATH": os.defpath},
    )
    return links


PLANTING_SETUP = """
import pathlib
here = pathlib.Path.cwd()
(here / ".git" / "objects").mkdir(parents=True, exist_ok=True)
(here / ".git" / "refs" / "heads").mkdir(parents=True, exist_ok=True)
(here / ".git" / "HEAD").write_text("ref: refs/heads/main\\n")
(here / ".git" / "config").write_text({config!r})
(here / ".gitattributes").write_text("* filter=planted\\n")
raise SystemExit("metadata fails, as vLLM's does without its build requirements")
"""


def test_a_release_setup_py_cannot_plant_a_git_filter_for_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F1: ``bot fetch`` lets pip run the release's ``setup.py`` (sandboxed) in the unpacked
    tree, then makes that tree a git repository: with a ``.git`` the build left, ``git add``
    would run its filter as the operator."""
    from bot.tree.fetch import release_tree

    mark = tmp_path / "filter-ran"
    fsmonitor = f'[core]\n\tfsmonitor = "echo ran >> {mark}"\n'
    config = FILTER_CONFIG.format(mark=mark).replace("[core]\n", fsmonitor, 1)
    links = _sdist(tmp_path, PLANTING_SETUP.format(config=config))
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")

    tree = release_tree("9.9.9")

    assert not mark.exists(), "git ran the planted filter as the operator"
    assert (tree / "vllm" / "__init__.py").is_file()
    # The release's own files are data in the commit; what the build planted in .git is gone.
    config_text = (tree / ".git" / "config").read_text()
    assert "planted" not in config_text and "fsmonitor" not in config_text


PLANT_WHEEL = """
import os, pathlib
for where in (os.environ.get("PIP_CACHE_DIR"), {operator_cache!r}):
    try:
        wheels = pathlib.Path(where, "wheels", "planted")
        wheels.mkdir(parents=True, exist_ok=True)
        (wheels / "requests-99.0-py3-none-any.whl").write_text("runs when installed")
    except OSError:
        pass
"""


def test_a_build_step_cannot_plant_a_wheel_in_the_operators_pip_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """L1: a build step's code could write pip's cache, which a later install outside the
    sandbox (``./dev setup``, the operator's own pip) trusts. Each build has a cache of its own."""
    operator_cache = tmp_path / "operator-pip-cache"
    operator_cache.mkdir()
    monkeypatch.setenv("PIP_CACHE_DIR", str(operator_cache))
    dest = tmp_path / "env"
    dest.mkdir()
    plant = PLANT_WHEEL.format(operator_cache=str(operator_cache))
    with build_step([sys.executable, "-c", plant], extra={}, writable=[dest]) as step:
        step.communicate(timeout=120)
    assert list(operator_cache.rglob("*")) == []


def test_bot_env_never_writes_through_a_link_its_build_planted(tmp_path: Path) -> None:
    """L2: the build steps write the environment's directory; the bot then writes its manifest
    and the torchvision stand-in there. A link left in place of either (or of a directory on
    the way) must not carry the bot's write elsewhere."""
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("the operator's file\n")
    dest = tmp_path / "env"
    dest.mkdir()
    plant = (
        "import os, sys\n"
        "dest, victim = sys.argv[1], sys.argv[2]\n"
        "os.symlink(victim, os.path.join(dest, 'bot-env.json.tmp'))\n"
        "os.symlink(victim, os.path.join(dest, 'bot-env.json'))\n"
        "lib = os.path.join(dest, 'lib', 'python3.11')\n"
        "os.makedirs(lib)\n"
        "os.symlink(os.path.dirname(victim), os.path.join(lib, 'site-packages'))\n"
    )
    command = [sys.executable, "-c", plant, str(dest), str(victim)]
    with build_step(command, extra={}, writable=[dest]) as step:
        output, _ = step.communicate(timeout=120)
    assert (dest / "bot-env.json").is_symlink(), output

    write_manifest(EnvInfo(version="9.9.9", path=dest, python=dest / "bin" / "python"))
    with pytest.raises(BotError, match="could not write"):
        _write_torchvision_ops(dest / "bin" / "python")

    assert victim.read_text() == "the operator's file\n"
    assert sorted(p.name for p in victim.parent.iterdir()) == ["victim.txt"]
    manifest = dest / "bot-env.json"
    assert not manifest.is_symlink() and '"version": "9.9.9"' in manifest.read_text()


CONFTEST_SWAPPING_THE_REPORT = '''
import os


def pytest_unconfigure(config):
    """After pytest wrote the report: put a link to another file in its place."""
    report = config.option.xmlpath
    if report:
        os.unlink(report)
        os.symlink({secret!r}, report)
'''


def _gpu_checkout(workspace: Path, conftest: str = "") -> None:
    tests = workspace / "vllm" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_gpu.py").write_text("def test_passes():\n    assert True\n")
    if conftest:
        (tests / "conftest.py").write_text(conftest)


def test_the_gpu_runner_finds_its_junit_report_given_a_relative_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """I1: gpu-verify.yml runs ``bot gpu-test --cwd vllm --junit results/junit.xml``; the
    report is where the workflow uploads it from (the job's directory, not pytest's)."""
    workspace = tmp_path / "workspace"
    _gpu_checkout(workspace)
    monkeypatch.chdir(workspace)
    tests = "tests/test_gpu.py::test_passes"

    code = main(["gpu-test", "--cwd", "vllm", "--junit", "results/junit.xml", "--tests", tests])

    assert code == 0, capsys.readouterr()
    assert "gpu-test: success: 1 tests" in capsys.readouterr().out
    assert 'tests="1"' in (workspace / "results" / "junit.xml").read_text()


def test_the_gpu_tests_cannot_make_the_uploaded_report_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """L4: the workflow uploads results/junit.xml with upload-artifact, which follows links: a
    test (or conftest) that swapped the report for a link would upload any file of the runner.
    The tests never see that path; what they leave is copied only if it is a regular file."""
    secret = tmp_path / "runner-secret"
    secret.write_text("the runner's registration token\n")
    workspace = tmp_path / "workspace"
    _gpu_checkout(workspace, CONFTEST_SWAPPING_THE_REPORT.format(secret=str(secret)))
    monkeypatch.chdir(workspace)
    tests = "tests/test_gpu.py::test_passes"
    report = workspace / "results" / "junit.xml"

    code = main(["gpu-test", "--cwd", "vllm", "--junit", str(report), "--tests", tests])

    assert not report.is_symlink()
    assert code != 0 and not report.exists()  # no report but a link: no report at all
    assert secret.read_text() == "the runner's registration token\n"


FAILING_BWRAP = """#!/bin/sh
echo "bwrap: No permissions to creating new namespace, likely because the kernel does not \
allow non-privileged user namespaces." >&2
exit 1
"""


@pytest.fixture
def no_namespaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A machine whose kernel forbids the sandbox's namespaces (ubuntu-latest as it comes):
    its bwrap starts and fails, as the real one does there."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text(FAILING_BWRAP)
    (bin_dir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("BOT_SANDBOX", raising=False)
    sandbox._probe.cache_clear()
    yield
    sandbox._probe.cache_clear()


def test_verify_without_a_usable_sandbox_refuses_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_namespaces: None,
) -> None:
    """I3: a plan of a release whose environment is not built yet: the build needs the
    sandbox, and so do the CPU tests. Verify used to record them "not checked" and exit 0."""
    monkeypatch.setenv("BOT_CACHE_DIR", str(tmp_path / "empty-cache"))
    plan_dir = _spy_plan(tmp_path, tmp_path / "unused")
    plan = read_plan_dir(plan_dir).plan
    plan.vllm_version = "9.9.9"
    update_plan(plan_dir, plan)
    capsys.readouterr()

    code = main(["verify", str(plan_dir), "--gpu", "skip"])

    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "sandbox" in err and "BOT_SANDBOX=off" in err


def test_the_gpu_runner_engine_check_downloads_and_fails_unless_it_checked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """I2: ``bot engine --checkpoint`` ran the engine with no network and no GPU, so it never
    checked anything, and exited 0. The checkpoints are now downloaded first, in a sandbox
    that has the network (the engine then runs offline from that cache, with the GPU device
    nodes), and a check that could not run fails the step: here the bot's own interpreter has
    no vLLM, so the engine harness cannot run."""
    repos = {
        name: HubRepo(config={"model_type": "llama"}) for name in ("tiny/target", "tiny/draft")
    }
    with HubStandIn(repos) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        code = main(["engine", "--checkpoint", "tiny/target", "--eagle3", "tiny/draft"])

    out = capsys.readouterr().out
    assert code == 1, out
    assert "engine check: not checked: the engine harness" in out  # it ran, offline
    for name in repos:  # downloaded by the sandboxed step, for the offline engine
        fetched = [p for p in hub.requests if p.startswith(f"/{name}/resolve/")]
        assert any(p.endswith("/config.json") for p in fetched), hub.requests


TUNNELS = """
import os, socket, sys
from urllib.parse import urlsplit
proxy = urlsplit(os.environ["HTTPS_PROXY"])
said = []
for port in sys.argv[1:]:
    with socket.create_connection((proxy.hostname, proxy.port), timeout=30) as tunnel:
        tunnel.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n".encode())
        said.append(tunnel.recv(4096).split(b"\\r\\n")[0].decode())
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=5).close()
    said.append("direct: connected")
except OSError:
    said.append("direct: no network")
print("TUNNELS", said)
"""


def test_a_build_step_reaches_the_package_index_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """L3: build steps shared the host's network, so code from the index reached a local ``bot
    dashboard --as`` (and anything else the machine reaches). Now the step has loopback only,
    and its proxy tunnels to the package index's hosts alone."""
    index, dashboard = (
        socket.create_server(("127.0.0.1", 0)),
        socket.create_server(("127.0.0.1", 0)),
    )
    monkeypatch.setenv("BOT_INDEX_HOSTS", f"127.0.0.1:{index.getsockname()[1]}")
    ports = [str(s.getsockname()[1]) for s in (index, dashboard)]
    dest = tmp_path / "env"
    dest.mkdir()
    try:
        with build_step([sys.executable, "-c", TUNNELS, *ports], extra={}, writable=[dest]) as step:
            output, _ = step.communicate(timeout=120)
    finally:
        index.close()
        dashboard.close()
    (said,) = [line for line in output.splitlines() if line.startswith("TUNNELS")]
    assert "'HTTP/1.1 200 Connection established'" in said  # the index
    assert "'HTTP/1.1 403 Forbidden'" in said  # the dashboard
    assert "'direct: no network'" in said


def test_a_build_step_never_starts_with_an_index_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """L3: the index credential in pip's configuration reached the build step's code."""
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://bot:pypi-token0123@index.invalid/simple")
    dest = tmp_path / "env"
    dest.mkdir()
    with (
        pytest.raises(BotError, match="gives it an index credential") as refused,
        build_step([sys.executable, "-c", "print('ran')"], extra={}, writable=[dest]),
    ):
        pass
    assert "pypi-token0123" not in str(refused.value) and "\n" not in str(refused.value)


THROUGH_THE_OPERATORS_PROXY = """
import os, socket
from pathlib import Path
from urllib.parse import urlsplit
proxy = urlsplit(os.environ["HTTPS_PROXY"])
with socket.create_connection((proxy.hostname, proxy.port), timeout=30) as tunnel:
    tunnel.sendall(b"CONNECT index.test:443 HTTP/1.1\\r\\n\\r\\n")
    got = b""
    while chunk := tunnel.recv(4096):
        got += chunk
seen = [v for v in os.environ.values() if "s3cret" in v]
for environ in Path("/proc").glob("[0-9]*/environ"):
    try:
        seen += [environ.name] if b"s3cret" in environ.read_bytes() else []
    except OSError:
        pass
print("THROUGH", got.split(b"\\r\\n")[0].decode(), got.endswith(b"UPSTREAM-OK"), seen)
"""


class _OperatorsProxy(socketserver.BaseRequestHandler):
    """The operator's HTTPS proxy (with a password): records each request's head, opens a
    pretend tunnel that says one line and closes."""

    heads: list[bytes] = []

    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head and (chunk := self.request.recv(4096)):
            head += chunk
        self.heads.append(head)
        self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\nUPSTREAM-OK")


def test_a_build_step_reaches_the_index_through_the_operators_proxy_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """L3 on a machine that reaches the index only through its own HTTPS_PROXY: the tunnel goes
    through that proxy, with its credential, which stays outside the step (it used to be in
    the step's environment)."""
    _OperatorsProxy.heads = []
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _OperatorsProxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for name in ("NO_PROXY", "no_proxy", "PIP_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(
        "HTTPS_PROXY", f"http://operator:s3cret@127.0.0.1:{server.server_address[1]}"
    )
    monkeypatch.setenv("BOT_INDEX_HOSTS", "index.test")
    dest = tmp_path / "env"
    dest.mkdir()
    try:
        command = [sys.executable, "-c", THROUGH_THE_OPERATORS_PROXY]
        with build_step(command, extra={}, writable=[dest]) as step:
            output, _ = step.communicate(timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    (said,) = [line for line in output.splitlines() if line.startswith("THROUGH")]
    assert said == "THROUGH HTTP/1.1 200 Connection established True []", output
    (head,) = _OperatorsProxy.heads
    assert head.startswith(b"CONNECT index.test:443 HTTP/1.1\r\n")
    assert b"Proxy-Authorization: Basic b3BlcmF0b3I6czNjcmV0\r\n" in head  # operator:s3cret
