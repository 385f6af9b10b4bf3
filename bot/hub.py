"""The Hugging Face Hub, read through ``huggingface_hub``: a checkpoint's ``config.json`` and
model card, and whether the Hub can be reached at all.

Settings come from the environment at call time (``huggingface_hub`` reads its own at import):
``HF_ENDPOINT`` (the Hub's URL), ``HF_HUB_OFFLINE`` (no network; the local cache only) and
``HF_HUB_CACHE`` / ``HF_HOME`` (where files are cached, as ``huggingface_hub`` keeps them).
No token is ever sent: what is read here is public, and a gated repository is reported as such.

The Hub is probed once per endpoint and process, with one request and no retries (the client's
own backoff takes 20 s and more to give up); when it cannot be reached, files come from the
local cache, and a file not cached is ``unreachable``, never an error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bot.errors import BotError

DEFAULT_ENDPOINT = "https://huggingface.co"
MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few KB; anything larger is not read
_TIMEOUT = 10.0
_TRUE = frozenset({"1", "true", "yes", "on"})

READ, ABSENT, GATED, TOO_LARGE, UNREACHABLE = "read", "absent", "gated", "too large", "unreachable"


@dataclass(frozen=True)
class HubSettings:
    endpoint: str
    offline: bool
    cache: Path

    @classmethod
    def from_env(cls, endpoint: str | None = None) -> HubSettings:
        env = os.environ.get
        chosen = endpoint or env("HF_ENDPOINT") or DEFAULT_ENDPOINT
        home = env("HF_HOME") or str(Path(env("XDG_CACHE_HOME") or "~/.cache") / "huggingface")
        cache = env("HF_HUB_CACHE") or str(Path(home) / "hub")
        offline = (env("HF_HUB_OFFLINE") or "").strip().lower() in _TRUE
        return cls(chosen.rstrip("/"), offline, Path(cache).expanduser())


@dataclass(frozen=True)
class ConfigRead:
    """What the Hub (or its local cache) says of one repository's ``config.json``."""

    repo_id: str
    state: str  # READ | ABSENT | GATED | TOO_LARGE | UNREACHABLE
    config: dict[str, Any] | None = None
    source: str = ""  # "the Hub at <endpoint>" or "the local Hub cache"
    why: str = ""  # for a state other than READ

    @property
    def read(self) -> bool:
        return self.state == READ


# endpoint -> None (reachable) or why not; one probe per endpoint and process.
_PROBED: dict[str, str | None] = {}


class Hub:
    """Reads public files of Hub repositories, each once per instance."""

    def __init__(self, settings: HubSettings | None = None) -> None:
        self.settings = settings or HubSettings.from_env()
        self._configs: dict[str, ConfigRead] = {}

    @property
    def endpoint(self) -> str:
        return self.settings.endpoint

    @property
    def shown(self) -> str:
        """The endpoint as messages name it: without any user or password in the URL."""
        parts = urlsplit(self.endpoint)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit(parts._replace(netloc=netloc))

    def unreachable_because(self) -> str | None:
        """None when the Hub answers; else why it is not asked (offline mode, no connection)."""
        if self.settings.offline:
            return "HF_HUB_OFFLINE is set"
        if self.endpoint not in _PROBED:
            why = _probe(self.endpoint)
            _PROBED[self.endpoint] = why.replace(self.endpoint, self.shown) if why else None
        return _PROBED[self.endpoint]

    def require(self) -> None:
        """Raise a one-line BotError unless the Hub can be reached."""
        why = self.unreachable_because()
        if why is not None:
            raise BotError(f"cannot reach the Hugging Face Hub at {self.shown}: {why}")

    def config(self, repo_id: str) -> ConfigRead:
        if repo_id not in self._configs:
            self._configs[repo_id] = self._read_config(repo_id)
        return self._configs[repo_id]

    def base_models(self, repo_id: str) -> tuple[str, ...]:
        """The model card's ``base_model`` (a fine-tune's or a draft's target); empty when the
        Hub cannot be reached or the card names none."""
        if self.unreachable_because() is not None:
            return ()
        from huggingface_hub import HfApi

        try:
            info = HfApi(endpoint=self.endpoint, token=False).model_info(repo_id, timeout=_TIMEOUT)
        except Exception:  # noqa: BLE001 - any failure of a public lookup is "no card"
            return ()
        return card_base_models(info)

    def _read_config(self, repo_id: str) -> ConfigRead:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import (
            EntryNotFoundError,
            GatedRepoError,
            HFValidationError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
        )

        offline = self.unreachable_because()
        source = "the local Hub cache" if offline else f"the Hub at {self.shown}"
        kwargs: dict[str, Any] = {
            "endpoint": self.endpoint,
            "cache_dir": self.settings.cache,
            "token": False,
            "etag_timeout": _TIMEOUT,
            "local_files_only": offline is not None,
        }
        try:
            if offline is None:
                planned = hf_hub_download(repo_id, "config.json", dry_run=True, **kwargs)
                size = getattr(planned, "file_size", None)
                if size is not None and size > MAX_CONFIG_BYTES:
                    return ConfigRead(repo_id, TOO_LARGE, source=source, why=f"{size} bytes")
            local = hf_hub_download(repo_id, "config.json", **kwargs)
        except LocalEntryNotFoundError:  # before EntryNotFoundError: it is one
            why = offline or "the connection failed"
            return ConfigRead(repo_id, UNREACHABLE, source=source, why=f"not cached ({why})")
        except GatedRepoError:  # before RepositoryNotFoundError: it is one
            return ConfigRead(repo_id, GATED, source=source, why="gated: it needs a token")
        except (RepositoryNotFoundError, EntryNotFoundError, HFValidationError):
            return ConfigRead(repo_id, ABSENT, source=source, why="no such repository or file")
        except Exception as exc:  # noqa: BLE001 - a server or transport failure
            why = first_line(exc).replace(self.endpoint, self.shown)
            return ConfigRead(repo_id, UNREACHABLE, source=source, why=why)
        return _parsed(repo_id, Path(str(local)), source)


def _parsed(repo_id: str, path: Path, source: str) -> ConfigRead:
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return ConfigRead(repo_id, TOO_LARGE, source=source, why="over 1 MiB")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ConfigRead(repo_id, ABSENT, source=source, why="config.json is not JSON")
    if not isinstance(data, dict):
        return ConfigRead(repo_id, ABSENT, source=source, why="config.json is not an object")
    return ConfigRead(repo_id, READ, data, source)


def card_base_models(info: Any) -> tuple[str, ...]:
    card = getattr(info, "card_data", None)
    value = getattr(card, "base_model", None) if card is not None else None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str) and v)


def transport_error_type() -> type[Exception]:
    """The HTTP library huggingface_hub uses raises its own connection errors."""
    try:
        import httpx2

        return httpx2.TransportError
    except ImportError:
        import httpx

        return httpx.TransportError


def _probe(endpoint: str) -> str | None:
    """One request without retries, so an offline machine fails at once, not after backoff."""
    from huggingface_hub.utils import get_session

    try:
        response = get_session().get(
            f"{endpoint}/api/models", params={"limit": 1}, timeout=_TIMEOUT
        )
    except (transport_error_type(), OSError) as exc:
        return first_line(exc)
    if response.status_code >= 400:
        return f"it answered HTTP {response.status_code}"
    return None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else exc.__class__.__name__
