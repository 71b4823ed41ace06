"""Named contexts: where schedctl connects and with what, kept in a YAML file like a kubeconfig.

The file is ``$SCHEDCTL_CONFIG``, else ``$XDG_CONFIG_HOME/schedctl/config.yaml`` (by default
``~/.config/schedctl/config.yaml``)::

    current-context: prod
    contexts:
      prod:
        api: schedd.example.com:443
        token-file: ~/.schedd/prod-token      # or token: sdt_...
        tls-ca: ~/.schedd/ca.pem
        tls-cert: ~/.schedd/me.pem              # mutual TLS
        tls-key: ~/.schedd/me-key.pem
      local:
        api: 127.0.0.1:50051

A setting comes from, in order: the command line, the environment (``SCHEDD_API``,
``SCHEDCTL_TOKEN``, ``SCHEDCTL_TLS_*``), the context (``--context``, ``$SCHEDCTL_CONTEXT`` or the
file's ``current-context``), the default. A file that cannot be read or is not such a mapping is
an error naming the file and the key, never ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KEYS = ("api", "token", "token-file", "tls-ca", "tls-cert", "tls-key")
MAX_CONFIG_BYTES = 1024 * 1024


class ConfigError(Exception):
    pass


def config_path() -> Path:
    explicit = os.environ.get("SCHEDCTL_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "schedctl" / "config.yaml"


@dataclass
class Config:
    path: Path
    current: str
    contexts: dict[str, dict[str, str]]

    def context(self, name: str | None) -> dict[str, str]:
        """The settings of ``name`` (or the current context; none at all when there is neither)."""
        chosen = name or self.current
        if not chosen:
            return {}
        if chosen not in self.contexts:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise ConfigError(f"no context {chosen!r} in {self.path} (contexts: {known})")
        return self.contexts[chosen]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {"current-context": self.current, "contexts": self.contexts}
        staging = self.path.with_suffix(".tmp")
        staging.write_text(yaml.safe_dump(document, sort_keys=True))
        staging.chmod(0o600)
        staging.replace(self.path)


def load(path: Path | None = None) -> Config:
    path = path or config_path()
    if not path.exists():
        return Config(path, "", {})
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes")
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if document is None:
        return Config(path, "", {})
    if not isinstance(document, dict):
        raise ConfigError(f"{path} must be a mapping with current-context and contexts")
    current = document.get("current-context") or ""
    contexts = document.get("contexts") or {}
    if not isinstance(current, str):
        raise ConfigError(f"{path}: current-context must be a string")
    if not isinstance(contexts, dict):
        raise ConfigError(f"{path}: contexts must be a mapping of names to settings")
    return Config(
        path, current, {str(name): _settings(path, str(name), value) for name, value in contexts.items()}
    )


def _settings(path: Path, name: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: contexts.{name} must be a mapping")
    unknown = sorted(set(map(str, value)) - set(KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: contexts.{name}.{unknown[0]} is not a setting (settings: {', '.join(KEYS)})"
        )
    for key, setting in value.items():
        if not isinstance(setting, str):
            raise ConfigError(f"{path}: contexts.{name}.{key} must be a string")
    return {str(k): v for k, v in value.items()}


def token_of(settings: dict[str, str]) -> str:
    """The context's token, read from its token file if it names one."""
    if settings.get("token"):
        return settings["token"]
    file = settings.get("token-file")
    if not file:
        return ""
    try:
        return Path(file).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the token file {file!r}: {exc}") from None


def path_of(settings: dict[str, str], key: str) -> str:
    value = settings.get(key, "")
    return str(Path(value).expanduser()) if value else ""
