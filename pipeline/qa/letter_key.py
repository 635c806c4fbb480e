"""The secret that places correct options, kept outside every release.

Question ids ship in every export and the seed in ``manifest.json``, so a
letter drawn from (seed, id) alone can be recomputed by anyone holding the
release (issue 37: 100% of letters recovered). Every draw that places options
is therefore keyed by a *letter key*, 32 random bytes that never enter a
release, an export or the manifest: without it the letters are at chance,
with it a release is reproduced byte for byte.

Where the key comes from, first match wins: the environment variable
``SCAN2QA_LETTER_KEY`` (hex), else a key file, created on first use. A build's
key file is ``<output_root>/secrets/letter_key`` (beside ``releases/``, never
inside it), ``scan2qa generate``'s is ``--letter-key`` (default
``<out stem>.letter_key`` beside ``--out``). Only ``fingerprint`` (12 hex of
the key's sha256, not invertible) may be published, so a key holder can tell
which key made a release.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import storage
from pipeline.errors import ConfigError

ENV_VAR = "SCAN2QA_LETTER_KEY"
KEY_BYTES = 32
MIN_KEY_BYTES = 16  # a shorter secret could be searched
MAX_KEY_BYTES = 64  # BLAKE2b's longest key
_TWO_64 = 2.0**64


@dataclass(frozen=True)
class LetterKey:
    secret: bytes = field(repr=False)
    source: str = "?"  # where it was read, for messages; never the secret

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.secret).hexdigest()[:12]

    def ints(self, seed: int, purpose: str, qids: Iterable[object]) -> list[int]:
        """64-bit draws fixed by (key, seed, purpose, question id), so the id and seed alone say nothing.

        Keyed BLAKE2b (RFC 7693's keyed mode, a pseudorandom function like HMAC): 1.4 CPU-s per million ids
        here against 2.1 for HMAC-SHA256; the dataset-wide step draws twice per multiple-choice question.
        """
        base = hashlib.blake2b(f"{seed}\x1f{purpose}\x1f".encode(), key=self.secret, digest_size=8)
        out = []
        for qid in qids:
            h = base.copy()
            h.update(str(qid).encode())
            out.append(int.from_bytes(h.digest(), "little"))
        return out

    def unit_draws(self, seed: int, purpose: str, qids: Iterable[object]) -> list[float]:
        return [value / _TWO_64 for value in self.ints(seed, purpose, qids)]


def _parse_hex(text: str, where: str) -> bytes:
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        raise ConfigError(f"{where}: letter key is not a hex string") from None
    if not MIN_KEY_BYTES <= len(secret) <= MAX_KEY_BYTES:
        raise ConfigError(
            f"{where}: letter key has {len(secret)} bytes, {MIN_KEY_BYTES} to {MAX_KEY_BYTES} are needed"
        )
    return secret


def from_environment() -> LetterKey | None:
    value = os.environ.get(ENV_VAR)
    if not value:
        return None
    return LetterKey(_parse_hex(value, ENV_VAR), ENV_VAR)


def _read(path, where: str) -> bytes:
    data = path.read_bytes()
    if len(data) == KEY_BYTES:
        return data
    return _parse_hex(data.decode("ascii", errors="replace"), where)  # a key file written by hand as hex


def _create_local(path: Path) -> None:
    """Write a new key readable by its owner only; a concurrent creator's key wins if it got there first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # fails if the file appeared meanwhile: then that key is the key
        except FileExistsError:
            pass
    finally:
        os.remove(tmp)


def load_or_create(uri: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> LetterKey:
    """``SCAN2QA_LETTER_KEY`` if set, else the key file at ``uri`` (local or object store), made if absent."""
    env = from_environment()
    if env is not None:
        return env
    path = storage.upath(uri, storage_options)
    where = str(uri)
    with storage.reaching(uri):
        if not path.exists():
            if storage.is_local(path):
                _create_local(Path(path.path))
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(secrets.token_bytes(KEY_BYTES))
        return LetterKey(_read(path, where), where)


def build_key_uri(output_root: str) -> str:
    return f"{str(output_root).rstrip('/')}/secrets/letter_key"


def build_key(output_root: str, storage_options: dict[str, Any] | None = None) -> LetterKey:
    """A build's letter key: ``SCAN2QA_LETTER_KEY``, else ``<output_root>/secrets/letter_key``."""
    return load_or_create(build_key_uri(output_root), storage_options)


def default_key_file(out: str | os.PathLike) -> Path:
    """``scan2qa generate``'s key file when ``--letter-key`` is not given: ``<out stem>.letter_key`` beside ``out``."""
    out = Path(out)
    return out.parent / f"{out.stem}.letter_key"


def required(key: LetterKey | None) -> LetterKey:
    """``key``, else the environment's; a caller that names neither gets one line saying how to give one."""
    if key is not None:
        return key
    env = from_environment()
    if env is None:
        raise ConfigError(
            f"no letter key: set {ENV_VAR} (hex) or pass a key file; correct letters are drawn from it"
        )
    return env
