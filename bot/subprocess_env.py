"""The environment every subprocess the bot starts gets: an allow-list, never a copy of ours.

A subprocess may run upstream code (pytest, ``import vllm``, ruff's config, git hooks), so it must
not see credentials or the Actions runner's command files (``GITHUB_TOKEN``, ``GITHUB_ENV``,
``GITHUB_OUTPUT``, ``ACTIONS_*``). Only what locating programs, certificates, locale, temporary
files, the package index and the bot's own caches need is passed on.

A subprocess that runs upstream code (pytest on a vLLM tree, the smoke harness) gets
:func:`upstream_code_env` on top: a scratch ``HOME`` and nothing naming a place in the real one,
so that no tool reads the operator's ``~/.git-credentials``, ``~/.netrc``, ``~/.config/gh`` or
``~/.cache/huggingface/token`` on the code's behalf.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from bot.errors import BotError
from bot.index_proxy import index_hosts, index_proxy
from bot.sandbox import disabled as sandbox_disabled
from bot.sandbox import handed_over, interpreter_roots, sandboxed

_KEEP = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "BOT_CACHE_DIR",
        "BOT_HOME",
    }
)
_KEEP_PREFIXES = ("LC_", "PIP_", "XDG_")
# Never passed on, even if a prefix above would admit them.
_SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "_KEY")


def minimal_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of ``os.environ``, plus ``extra`` (which the caller vouches for)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if (name in _KEEP or name.startswith(_KEEP_PREFIXES))
        and not any(marker in name.upper() for marker in _SECRET_MARKERS)
    }
    if extra:
        env.update(extra)
    return env


# The bot's own data (journal, draft catalogue, trees): upstream code has no business there.
_BOT_DIRS = frozenset({"BOT_HOME", "BOT_CACHE_DIR"})


@contextmanager
def scratch_home() -> Iterator[Path]:
    """An empty, private directory to serve as ``HOME``; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bot-home-") as home:
        yield Path(home)


def upstream_code_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """:func:`minimal_env` for a process that runs upstream code: ``HOME`` (and the XDG
    directories, where caches and configs go) is ``home``, and no variable but ``PATH`` may
    name a place inside the real home directory or the bot's own data; then ``extra``."""
    real_homes = _real_homes()
    env = {
        name: value
        for name, value in minimal_env().items()
        if name not in _BOT_DIRS
        and not name.startswith(("XDG_", "PIP_"))  # an index URL may carry a credential
        and (name == "PATH" or not _names_a_place_in(value, real_homes))
    }
    env.update(
        {
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
        }
    )
    if extra:
        env.update(extra)
    return env


def proxy_settings() -> dict[str, str]:
    """The proxy a step with the network needs to reach the package index or the Hub (kept
    out of every other subprocess)."""
    names = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")
    return {name: os.environ[name] for name in names if name in os.environ}


def _real_homes() -> set[str]:
    homes = {os.environ.get("HOME", ""), os.path.expanduser("~")}
    with suppress(KeyError):
        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    return {os.path.realpath(h) for h in homes if h and os.path.realpath(h) != "/"}


def _names_a_place_in(value: str, homes: set[str]) -> bool:
    for part in value.split(os.pathsep):
        if part and any(
            os.path.realpath(part) == h or os.path.realpath(part).startswith(h + os.sep)
            for h in homes
        ):
            return True
    return False


# Names of variables that hold a credential (the allow-list above drops more, e.g. ``*_KEY``
# fingerprints; these are the ones worth refusing to run next to), and a URL carrying one
# (``PIP_INDEX_URL=https://user:token@host/simple``, pip's documented form).
_CREDENTIAL_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "API_KEY", "PRIVATE_KEY")
_URL_WITH_CREDENTIAL = re.compile(r"://[^/\s@:]+:[^/\s@]+@")


def credentials_children_can_read() -> list[str]:
    """Names of this process's credential variables that a child running as the same user can
    read whatever environment it is given: ``/proc/<our pid>/environ`` holds the environment
    this process started with (a value set or unset later is not reflected there)."""
    try:
        raw = Path("/proc/self/environ").read_bytes()
        started_with = dict(
            entry.decode("utf-8", "replace").partition("=")[::2]
            for entry in raw.split(b"\0")
            if b"=" in entry
        )
    except OSError:  # no /proc (macOS): nothing to read there, so the live environment decides
        started_with = dict(os.environ)
    return sorted(
        name
        for name, value in started_with.items()
        if value
        and (
            any(marker in name.upper() for marker in _CREDENTIAL_MARKERS)
            or _URL_WITH_CREDENTIAL.search(value)
        )
    )


def refuse_beside_credentials(what: str, then: str = "") -> None:
    """Raise (names only, never values) if code started now could read a credential of ours;
    ``then`` says what to do afterwards, with the credential."""
    names = credentials_children_can_read()
    if names:
        listed = ", ".join(names)
        unset = " ".join(f"-u {name}" for name in names)
        raise BotError(
            f"{what} runs upstream code, which could read {listed} from this process's "
            f"environment (same user: /proc/<pid>/environ); run it without them "
            f"(`env {unset} bot ...`){then}"
        )


def run_upstream_code(
    command: list[str],
    *,
    cwd: Path,
    extra: Mapping[str, str],
    timeout: float | None,
    writable: Sequence[Path] = (),
    readable: Sequence[Path] = (),
    devices: Sequence[str] = (),
    network: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run a process that executes upstream code (pytest on a vLLM tree, the smoke harness,
    the engine): never beside a credential it could read, with a scratch ``HOME`` and the
    minimal environment plus ``extra``, inside the sandbox (:mod:`bot.sandbox`: no network
    unless asked, no other process, the real home and the bot's data hidden, everything
    read-only, ``cwd`` included, but ``writable`` and the scratch home; ``readable`` and
    ``PYTHONPATH`` are bound back read-only). What it leaves in ``writable`` is data
    (:mod:`bot.untrusted_files`). Raises ``subprocess.TimeoutExpired`` like ``subprocess.run``."""
    refuse_beside_credentials(f"`{Path(command[0]).name} {' '.join(command[1:3])}`")
    with scratch_home() as home, handed_over([home, *writable]):
        env = upstream_code_env(home, {"TMPDIR": "/tmp", **extra})
        on_path = [Path(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        wrapped = sandboxed(
            command,
            cwd=cwd,
            home=home,
            readable=[*readable, *on_path],
            writable=writable,
            network=network,
            hidden_homes=_real_homes(),
            devices=devices,
        )
        return subprocess.run(
            wrapped,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@contextmanager
def build_step(
    command: list[str],
    *,
    extra: Mapping[str, str],
    writable: Sequence[Path],
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[str]]:
    """A running build step that may run code from the package index (pip building a release's
    requirements or its source distribution): in the sandbox, the minimal environment (the
    machine's pip settings kept) with a scratch ``HOME`` and a pip cache of its own (a build
    could plant a wheel in a shared one for a later install outside the sandbox to run),
    nothing but ``writable`` and those two writable, and no network but a tunnel to the
    package index (:mod:`bot.index_proxy`); stdout and stderr merged into one text pipe. The
    step is ended when the block ends."""
    with (
        scratch_home() as home,
        tempfile.TemporaryDirectory(prefix="bot-pip-cache-") as pip_cache,
        _to_the_index(command) as (relayed, relay_dirs),
        handed_over([home, Path(pip_cache), *writable]),
    ):
        where = cwd or home
        env = {k: v for k, v in minimal_env().items() if not k.startswith("XDG_")}
        if sandbox_disabled():  # pip uses the operator's proxy itself
            env.update(proxy_settings())
        else:  # the index proxy outside uses it: its credential never enters the step
            env.pop("PIP_PROXY", None)
        env.update({"HOME": str(home), "TMPDIR": "/tmp", "PIP_CACHE_DIR": pip_cache, **extra})
        # Local wheel directories the machine's pip configuration names stay readable.
        links = [Path(p) for p in env.get("PIP_FIND_LINKS", "").split() if p.startswith("/")]
        wrapped = sandboxed(
            relayed,
            cwd=where,
            home=home,
            readable=[*links, *relay_dirs, *interpreter_roots(command[0])],
            writable=[*writable, Path(pip_cache)],
            hidden_homes=_real_homes(),
        )
        process = subprocess.Popen(
            wrapped,
            cwd=where,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


_NET_RELAY = Path(__file__).with_name("net_relay.py")


@contextmanager
def _to_the_index(command: list[str]) -> Iterator[tuple[list[str], list[Path]]]:
    """``command`` run behind :mod:`bot.net_relay`, with the index proxy serving it, and the
    directories the sandbox must show for that; unchanged with the sandbox off (the host's
    network then)."""
    if sandbox_disabled():
        yield command, []
        return
    with index_proxy(index_hosts()) as socket_path:
        relay = [sys.executable, str(_NET_RELAY), str(socket_path), "--", *command]
        yield relay, [socket_path.parent, _NET_RELAY.parent]
