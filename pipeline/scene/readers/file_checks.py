"""Refuse a scan folder's hostile entries before any reader opens a file.

A reader opens files by name. Two kinds of entries make that unsafe, and both
are cheap to see from one directory listing per folder (``os.scandir`` gives
the entry type without opening anything):

* **special files** (a FIFO, a socket, a device) in place of a mesh or an
  annotation: opening a FIFO blocks until a writer appears, so the build hangs;
* **symbolic links that leave the scans root** (a scan folder linked to some
  other directory, an aggregation linked to ``/etc/hostname``): the build would
  read, and fingerprint, files the configured root does not hold. They are
  refused unless ``allow_links_outside_root`` is set; dangling links and link
  loops are refused too, since no reader could use them.

Every refusal is a ``ScanError`` naming the scan, the entry relative to the
scan folder and what it is, so the build reports one line instead of hanging
or reading elsewhere.

Files the scans root holds beside its scans (the label map) are read through
``read_root_file``: the same refusals (a link leaving the root, a special file,
checked from ``os.stat`` before anything is opened and again on the opened
descriptor) plus a size bound, since one such file is read by every scan.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.scene.readers.layouts import scans_root_folders
from pipeline.storage import within_root

# Scan folders are shallow (ScanNet: color/, pose/, ...; ARKitScenes: <id>_frames/lowres_wide/); a folder nested
# deeper than this is not read by any reader, so it is not walked.
MAX_CHECK_DEPTH = 6
SWITCH = "allow_links_outside_root"


def inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it; both already resolved (``os.path.realpath``)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return "not a regular file"


def link_problem(path: str, root_real: str, allow_outside: bool) -> tuple[str | None, str]:
    """(problem or None, resolved target) of the symbolic link at ``path``."""
    target = os.path.realpath(path)
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop: refused", target
        return f"dangling symbolic link (to {os.readlink(path)}): refused", target
    if not allow_outside and not inside(target, root_real):
        return f"symbolic link to {target}, outside the scans root: refused (set {SWITCH}: true to read it)", target
    return None, target


def check_scan_folder(folder: Path, key: str, root: str, allow_outside: bool = False) -> None:
    """Raise a ``ScanError`` for the first special file or refused link in ``folder`` (sorted walk)."""
    root_real = os.path.realpath(root)
    folder_real = os.path.realpath(folder)
    if not allow_outside and not inside(folder_real, root_real):
        raise ScanError(
            key, ".", f"scan folder resolves to {folder_real}, outside the scans root {root_real}: refused "
            f"(set {SWITCH}: true to read it)"
        )
    seen: set[tuple[int, int]] = set()

    def visit(path: str, rel: str, depth: int) -> None:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) in seen:
            return
        seen.add((st.st_dev, st.st_ino))
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise ScanError(key, rel or ".", f"folder cannot be listed ({exc.strerror or type(exc).__name__})") from None
        for entry in entries:
            # Printable even when the name is not UTF-8 (os.scandir hands such bytes over as surrogates).
            name = f"{rel}{entry.name}".encode("utf-8", "backslashreplace").decode("utf-8")
            if entry.is_symlink():
                problem, _ = link_problem(entry.path, root_real, allow_outside)
                if problem:
                    raise ScanError(key, name, problem)
            # The entry type comes with the listing (no stat) except for links and special files.
            try:
                if entry.is_dir():
                    if depth < MAX_CHECK_DEPTH:
                        visit(entry.path, f"{name}/", depth + 1)
                    continue
                if entry.is_file():
                    continue
                mode = entry.stat().st_mode
            except OSError as exc:
                raise ScanError(key, name, f"cannot be read ({exc.strerror or type(exc).__name__})") from None
            raise ScanError(key, name, f"{kind_of(mode)}, not a regular file: refused before opening")

    visit(str(folder), "", 0)


def scans_root_of(folder: Path, config: Config) -> str:
    """The configured scans root when the scan is below it, else the scan's own download top (parent or above)."""
    if within_root(config.scans_root, str(folder)):
        return config.scans_root
    return str(scans_root_folders(folder)[-1])


def root_file_region(path: Path, root: str) -> str:
    """Where a scans-root file's link may point: the scans root, or the folder holding the file when that folder is
    above the root (ScanNet's label map sits above ``scans/`` in its download), both resolved."""
    root_real = os.path.realpath(root)
    folder_real = os.path.realpath(path.parent)
    return folder_real if inside(root_real, folder_real) else root_real


def too_large(size: int, max_bytes: int) -> str:
    return f"{size} bytes, more than the {max_bytes} bytes such a file may have: refused before reading"


def read_root_file(
    path: Path, key: str, name: str, max_bytes: int, *, region: str | None, allow_outside: bool = False
) -> bytes:
    """The bytes of a file every scan reads (the label map), refused the way a scan's own files are.

    ``region`` is the resolved folder a link may point into (``root_file_region``); None when the user named the
    file in the config, which is then read wherever it is. ``name`` is what the error lines call the file.
    A special file is refused from ``os.stat`` (nothing opened: a FIFO would block, ``/dev/zero`` never ends) and
    again from the opened descriptor (opened non-blocking, so a file swapped for a FIFO in between cannot hang);
    a file over ``max_bytes`` is refused before it is read, and reading stops at ``max_bytes + 1`` bytes.
    """
    if region is not None and os.path.islink(path):
        problem, _ = link_problem(str(path), region, allow_outside)
        if problem:
            raise ScanError(key, name, problem)

    def refuse_special(mode: int) -> None:
        if not stat.S_ISREG(mode):
            raise ScanError(key, name, f"{kind_of(mode)}, not a regular file: refused before reading")

    def refuse_size(size: int) -> None:
        if size > max_bytes:
            raise ScanError(key, name, too_large(size, max_bytes))

    try:
        st = os.stat(path)
        refuse_special(st.st_mode)
        refuse_size(st.st_size)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            refuse_special(st.st_mode)
            refuse_size(st.st_size)
            chunks, total = [], 0
            while total <= max_bytes:
                chunk = os.read(fd, max_bytes + 1 - total)
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ScanError(key, name, f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    if total > max_bytes:
        raise ScanError(key, name, f"grew past the {max_bytes} bytes such a file may have while it was read: refused")
    return b"".join(chunks)
