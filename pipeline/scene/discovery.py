"""Find scan folders under a scans root, local or ``s3://``, and notice which ones changed.

A scans root holds scan folders either directly (``<root>/scene0000_00``) or one
level down in any folder — by dataset (``<root>/scannet/scene0000_00``) or as a
dataset's own download lays them out (ScanNet's ``<root>/scans/scene0000_00``
and ``<root>/scans_test/...``, ScanNet++'s ``<root>/data/...``) — or is one scan
folder. Which dataset a folder belongs to is the readers' decision
(``pipeline.scene.readers.detect_dataset``), so a new reader makes its scans
discoverable without touching this module. Each scan is keyed
``"<dataset>/<scene_id>"`` (the folder name is the scene id), which is also its
Dagster partition key.

Scans are found once
--------------------
Only discovery (the sensor tick, ``scan2qa build``) lists the root. It records
where each scan is — the run's ``scan2qa/source`` tag, then the ``scans``
table's ``source_uri`` — and a step reads the scan from there. A step that has
neither (a run launched by hand) uses ``locate_scan``, which tries the few
folders the layouts above name and never lists the root: steps run on workers
far from the scans, where re-listing a root of thousands of scans on S3 would
cost more than the step.

Why change detection is shaped the way it is
--------------------------------------------
The discovery sensor runs every two minutes inside Dagster's sensor evaluation
limit (60 s by default). Real roots are large: ScanNet is ~1,500 scans with
thousands of frame images each (colour, depth and pose per frame), on local
disks or on S3. Listing every file of every scan on every tick — what the first
version did — costs one ``stat`` per file (about 8 µs each through fsspec, so
minutes per tick at ScanNet scale) and, on S3, one paginated list request per
1,000 objects of every scan. Two things keep a tick small:

1. **A cheap fingerprint** (``scan_fingerprint``) that still covers what the
   readers read:

   - *local disks*: size and mtime of every file except frame images — the
     mesh, annotations, segments, metadata, ``.sens``/video streams, and
     per-frame poses and intrinsics, which readers parse up front. Frame images
     (``.jpg``, ``.png``, ``.pgm``, ... in subfolders: the bulk of the files)
     are summarised per folder by one directory listing without ``stat``: their
     count, a hash of their names and the folder's own mtime, which the
     filesystem updates whenever an entry is added, removed or renamed into
     place (how ``rsync``, ``aws s3 sync`` and atomic writers replace files).
     An image rewritten in place under the same name is therefore not noticed;
     the weekly full rebuild covers that case.
   - *object storage*: there are no directory mtimes, but one flat listing of
     the scan prefix (``fs.find``: one request per 1,000 objects) returns every
     object's size and ETag at once, so the fingerprint covers every object;
     listings always bypass fsspec's listings cache, which would otherwise hide
     new folders from a long-lived sensor process.

2. **Bounded work per tick** (``discovery_tick``): one listing of the root (and
   of its dataset folders); folders already known from the cursor are not
   re-detected; at most ``max_scans`` scans are fingerprinted per tick and no
   new fingerprint starts after ``max_seconds`` (always at least one, so every
   tick makes progress). New scans go first, then the known scans in a rotation
   that resumes where the previous tick stopped, so every scan is checked once
   per ``ceil(scans / max_scans)`` ticks. On object storage listings run on a
   few threads, since their cost is latency rather than CPU.

``full_listing_fingerprint`` keeps the old every-file fingerprint as the
baseline of ``scan2qa bench discovery``.

An output root inside the scans root (``--out scans/out``) is left out of the
walk by itself (``exclude``): it holds no scans, and listing it as a skipped
folder would put the build's own output in its manifest.
"""

from __future__ import annotations

import bisect
import errno
import hashlib
import json
import math
import os
import posixpath
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from upath import UPath

from pipeline.errors import ScanError
from pipeline.storage import is_local, upath, within_root

# How deep below the root scan folders may sit: root/<scan> or root/<group>/<scan>.
MAX_DEPTH = 2
# Frame images below a scan folder are summarised per folder instead of stat-ed one by one.
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".pgm", ".ppm", ".exr", ".tif", ".tiff", ".bmp", ".webp"})
# Concurrent listings on object storage (latency-bound); local listings run on the calling thread.
REMOTE_WORKERS = 8
# Cursor value of a scan taken over from a cursor of the first format: its next fingerprint is the
# baseline (no run), since the old fingerprints were computed differently.
ADOPTED = ""
CURSOR_VERSION = 2

T = TypeVar("T")
R = TypeVar("R")


def _detect(folder: UPath) -> str | None:
    from pipeline.scene.readers import detect_dataset

    return detect_dataset(folder)


# Dagster refuses partition keys holding these (``dagster._core.definitions.partitions.utils.base``).
_KEY_BREAKERS = ("...", "\a", "\b", "\f", "\n", "\r", "\t", "\v", "\0")
# Longest folder name taken: outputs are named <scene_id>.parquet / .mp4 within the usual 255-byte name limit.
MAX_NAME_BYTES = 200


def name_problem(name: str) -> str | None:
    """Why a folder name cannot become a scene id (and a partition key, and output file names), or None."""
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(name)
        return f"folder name {raw!r} is not valid UTF-8: refused"
    if any(part in name for part in _KEY_BREAKERS) or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return f"folder name {name!r} holds '...' or control characters, which a partition key cannot: refused"
    if len(encoded) > MAX_NAME_BYTES:
        return f"folder name is {len(encoded)} bytes long, more than {MAX_NAME_BYTES} (output file names would not fit): refused"
    return None


def _printable(rel: str) -> str:
    """A relative path safe to print (non-UTF-8 bytes shown escaped)."""
    return rel.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass
class _Listing:
    root_real: str = ""  # the scans root, resolved; links leaving it are refused unless allowed
    allow_outside: bool = False
    problems: list[str] = field(default_factory=list)  # one line per folder entry that was skipped
    unlisted: int = 0  # folders that could not be listed: what they hold is unknown, not gone

    def skip(self, rel: str, problem: str) -> None:
        self.problems.append(f"{_printable(rel)}: {problem}")


def _local_subfolders(path: str, rel: str, listing: _Listing) -> list[str]:
    """Subfolders of a local folder worth walking; every entry that is a folder but refused is said why."""
    from pipeline.scene.readers.file_checks import link_problem

    names = []
    with os.scandir(path) as entries:
        for e in entries:
            if e.name.startswith("."):
                continue
            where = f"{rel}/{e.name}" if rel else e.name
            try:
                is_link, is_dir = e.is_symlink(), e.is_dir()
            except OSError as exc:
                why = "symbolic link loop" if exc.errno == errno.ELOOP else f"cannot be followed ({exc.strerror})"
                listing.skip(where, f"{why}: skipped")
                continue
            if is_link:
                problem, _ = link_problem(e.path, listing.root_real, listing.allow_outside)
                if problem and (is_dir or "dangling" in problem or "loop" in problem):
                    listing.skip(where, problem)
                    continue
            if not is_dir:
                continue
            problem = name_problem(e.name)
            if problem:
                listing.skip(where, problem)
                continue
            names.append(e.name)
    return names


def _subfolder_names(folder: UPath, rel: str = "", listing: _Listing | None = None) -> list[str]:
    """Names of the visible subfolders, sorted; one fresh listing (no fsspec listings cache)."""
    try:
        if is_local(folder):
            names = _local_subfolders(folder.path, rel, listing if listing is not None else _Listing(allow_outside=True))
        else:
            base = folder.path.rstrip("/")
            names = [
                info["name"].rstrip("/").rsplit("/", 1)[-1]
                for info in folder.fs.ls(base, detail=True, refresh=True)
                if info.get("type") == "directory" and info["name"].rstrip("/") != base
            ]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:  # unreadable folder (permissions, a loop): said, not fatal
        if listing is not None:
            listing.unlisted += 1
            listing.skip(rel or ".", f"cannot be listed ({exc.strerror or type(exc).__name__}): skipped")
        return []
    return sorted(n for n in names if not n.startswith("."))


def _detect_fresh(folder: UPath) -> str | None:
    """``detect_dataset`` on a freshly listed folder (on S3 the readers' ``exists`` calls then hit that listing)."""
    if not is_local(folder):
        try:
            folder.fs.ls(folder.path.rstrip("/"), detail=True, refresh=True)
        except OSError:
            return None
    return _detect(folder)


def _bounded_map(
    fn: Callable[[T], R], items: Iterable[T], workers: int, deadline: float, clock: Callable[[], float]
) -> list[R]:
    """``fn`` over a prefix of ``items``, in order: nothing new starts after ``deadline``, but at least one item runs."""
    results: list[R] = []
    source = iter(items)
    if workers <= 1:
        for item in source:
            if results and clock() >= deadline:
                break
            results.append(fn(item))
        return results
    pending: deque = deque()
    exhausted = False
    with ThreadPoolExecutor(workers) as pool:
        while True:
            while not exhausted and len(pending) < workers:
                if (results or pending) and clock() >= deadline:
                    exhausted = True
                    break
                item = next(source, _END)
                if item is _END:
                    exhausted = True
                    break
                pending.append(pool.submit(fn, item))
            if not pending:
                return results
            results.append(pending.popleft().result())


_END = object()


@dataclass
class _Walk:
    found: dict[str, str]  # key -> folder path relative to the root ("" when the root is the scan)
    complete: bool  # False when the deadline stopped detection of some unknown folders, or a folder was unreadable
    problems: list[str] = field(default_factory=list)  # folders under the root not taken, one line each


def _walk(
    base: UPath,
    known: Mapping[str, str],
    workers: int,
    deadline: float = math.inf,
    clock: Callable[[], float] = time.monotonic,
    allow_outside: bool = False,
    exclude: str | None = None,
) -> _Walk:
    """Scan folders under ``base``; folders in ``known`` (relative path -> key) are taken without re-detection.

    Every folder not taken says why in ``problems``: a refused name or link, a folder no reader knows
    (say, a scan whose mesh is missing), a scan found twice, a folder deeper than ``MAX_DEPTH``. The folder
    ``exclude`` (relative to ``base``: the output root) is neither walked nor reported, nor are the folders
    above it for holding it.
    """
    if "" in known:
        return _Walk({known[""]: ""}, True) if base.is_dir() else _Walk({}, True)
    if not known and base.is_dir():
        dataset = _detect_fresh(base)
        if dataset:
            return _Walk({f"{dataset}/{base.name}": ""}, True)
    listing = _Listing(os.path.realpath(base.path) if is_local(base) else "", allow_outside)
    # Folders holding known scans are dataset folders: walk into them without asking the readers.
    groups = {rel.rsplit("/", 1)[0] for rel in known if "/" in rel}
    candidates: list[tuple[tuple[str, ...], str, str]] = []  # (path parts, key, rel)
    complete = True
    level = [""]
    undetected: list[str] = []
    for depth in range(1, MAX_DEPTH + 1):
        children = [
            f"{rel}/{name}" if rel else name for rel in level for name in _subfolder_names(_join(base, rel), rel, listing)
        ]
        children = [rel for rel in children if rel != exclude]
        unknown = [rel for rel in children if rel not in known and rel not in groups]
        detected = _bounded_map(lambda rel: _detect_fresh(_join(base, rel)), unknown, workers, deadline, clock)
        datasets = dict(zip(unknown, detected))
        complete = complete and len(detected) == len(unknown)
        level = []
        for rel in children:
            if rel in known:
                candidates.append((tuple(rel.split("/")), known[rel], rel))
            elif rel in groups:
                level.append(rel)
            elif rel in datasets:
                if datasets[rel]:
                    candidates.append((tuple(rel.split("/")), f"{datasets[rel]}/{rel.rsplit('/', 1)[-1]}", rel))
                else:
                    level.append(rel)
                    undetected.append(rel)
    # Depth-first sorted order decides a duplicated key, so the choice is stable.
    found: dict[str, str] = {}
    for _, key, rel in sorted(candidates):
        if key in found:
            listing.skip(rel, f"{key} was already found at {_printable(found[key])}: this copy is skipped")
            continue
        found.setdefault(key, rel)
    # The top-most folder with no scan at or below it is reported once (not each of its subfolders); a folder
    # holding scans or refused entries is a dataset or download folder and those are reported instead.
    taken = [rel for _, _, rel in candidates]
    deeper = [rel for rel in undetected if rel.count("/") + 1 == MAX_DEPTH and _subfolder_names(_join(base, rel))]
    reported: list[str] = []
    noted = list(listing.problems)
    for rel in sorted(undetected, key=lambda r: (r.count("/"), r)):
        if any(rel.startswith(r + "/") for r in reported) or any(t.startswith(rel + "/") for t in taken):
            continue
        if exclude is not None and exclude.startswith(rel + "/"):
            continue  # it holds the output root; anything else in it is reported on its own
        if any(p.startswith(_printable(rel) + "/") for p in noted):
            continue
        reported.append(rel)
        why = "no reader recognises this folder or a folder in it (a ScanNet scan needs <scene>_vh_clean_2.ply)"
        if any(d == rel or d.startswith(rel + "/") for d in deeper):
            why += f"; scans are looked for at most {MAX_DEPTH} folders below the root"
        listing.skip(rel, f"{why}: skipped")
    # A folder that could not be listed leaves the walk incomplete too: the scans below it are not known to be gone.
    return _Walk(found, complete and not listing.unlisted, sorted(listing.problems))


def _join(base: UPath, rel: str) -> UPath:
    return base.joinpath(*rel.split("/")) if rel else base


def folder_below(root: str, location: str | None, storage_options: dict[str, Any] | None = None) -> str | None:
    """``location`` relative to ``root`` ("a/b") when it lies strictly below it, else None.

    Local paths are compared resolved (``os.path.realpath``: links and ``..`` followed, relative paths taken
    from the working directory), so ``--out ./scans/out`` and ``--out /abs/scans/out`` are the same folder;
    object-store URIs by their normalised paths within one bucket.
    """
    if not location:
        return None
    base, target = upath(root, storage_options), upath(location, storage_options)
    if is_local(base) and is_local(target):
        top, path = os.path.realpath(base.path), os.path.realpath(target.path)
        if path != top and path.startswith(top.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, top).replace(os.sep, "/")
        return None
    if not within_root(root, location, storage_options):
        return None
    top = posixpath.normpath(base.path.rstrip("/") or "/").rstrip("/")
    path = posixpath.normpath(target.path.rstrip("/") or "/")
    return path[len(top) + 1 :] or None if path.startswith(top + "/") else None


@dataclass
class Discovery:
    scans: list[tuple[str, str]]  # (key, uri), sorted by key
    skipped: list[str]  # one line per folder under the root that was not taken, and why
    excluded: str | None = None  # the folder left out by ``exclude`` (relative to the root), if it is inside
    complete: bool = True  # False when a folder could not be listed: scans below it are not known to be gone


def discover(
    root: str,
    storage_options: dict[str, Any] | None = None,
    *,
    allow_links_outside_root: bool = False,
    exclude: str | None = None,
) -> Discovery:
    """Every scan folder under ``root`` and every folder skipped, with the reason; empty when the root is absent.

    A root that is itself a scan folder yields just that scan. Folders linked from outside the root
    are refused unless ``allow_links_outside_root``. ``exclude`` (the output root) is left out of the walk
    when it lies below ``root``: not a scan, not a skipped folder; ``Discovery.excluded`` says so.
    """
    base = upath(root, storage_options)
    excluded = folder_below(root, exclude, storage_options)
    walk = _walk(
        base, {}, 1 if is_local(base) else REMOTE_WORKERS, allow_outside=allow_links_outside_root, exclude=excluded
    )
    return Discovery(sorted((key, str(_join(base, rel))) for key, rel in walk.found.items()), walk.problems, excluded,
                     walk.complete)


def discover_scans(
    root: str, storage_options: dict[str, Any] | None = None, *, allow_links_outside_root: bool = False
) -> list[tuple[str, str]]:
    """``(key, uri)`` of every scan folder under ``root``, sorted by key (``discover`` without the skipped list)."""
    return discover(root, storage_options, allow_links_outside_root=allow_links_outside_root).scans


def scan_candidates(root: str, key: str, storage_options: dict[str, Any] | None = None) -> list[UPath]:
    """The folders ``key`` can be in without listing the root, in the order ``_walk`` ranks a duplicated key.

    The root itself when it is the scan; else ``<root>/<scene_id>`` and ``<root>/<folder>/<scene_id>``
    for the dataset's folder and the datasets' download folders (``pipeline.scene.readers.layouts``).
    """
    from pipeline.scene.readers.layouts import DOWNLOAD_FOLDERS

    dataset, _, scene_id = key.partition("/")
    base = upath(root, storage_options)
    rels = {(scene_id,)} | {(group, scene_id) for group in (dataset, *DOWNLOAD_FOLDERS)}
    candidates = [base.joinpath(*rel) for rel in sorted(rels)]
    return [base, *candidates] if base.name == scene_id else candidates


def locate_scan(
    root: str, key: str, storage_options: dict[str, Any] | None = None, *, recorded: str | None = None
) -> str:
    """URI of the scan folder for ``key`` from a few existence checks; the root is never listed.

    ``recorded`` is where discovery found the scan before (the ``scans`` table's ``source_uri``); it
    is tried first and skipped when it is outside the root or no longer holds that scan. A scan in a
    folder no candidate names is reached only through what discovery recorded.
    """
    dataset, _, scene_id = key.partition("/")
    base = upath(root, storage_options)
    looked: list[str] = []
    if recorded:
        folder = upath(recorded, storage_options)
        if within_root(root, recorded, storage_options) and _is_scan(folder, dataset, scene_id):
            return recorded
        looked.append(f"the recorded source {recorded}")
    below: list[str] = []
    for candidate in scan_candidates(root, key, storage_options):
        if _is_scan(candidate, dataset, scene_id):
            return str(candidate)
        if candidate == base:
            looked.append("the root itself")
        else:
            below.append(candidate.path[len(base.path.rstrip("/")) + 1 :])
    looked.append(f"{', '.join(below)} under the root")
    raise ScanError(key, str(base), f"no scan folder for this key; looked at {'; '.join(looked)}")


def _is_scan(folder: UPath, dataset: str, scene_id: str) -> bool:
    try:
        return folder.name == scene_id and folder.is_dir() and _detect(folder) == dataset
    except OSError:  # unreadable or unreachable: not where the scan is
        return False


# --- fingerprints -------------------------------------------------------------------------------------------------


def _local_fingerprint(base: str) -> str:
    digest = hashlib.sha256()
    seen: set[tuple[int, int]] = set()  # folders already visited: a symlink loop is walked once

    def visit(path: str, rel: str, top: bool) -> None:
        folder = os.stat(path)
        if (folder.st_dev, folder.st_ino) in seen:
            return
        seen.add((folder.st_dev, folder.st_ino))
        files, images, folders = [], [], []
        with os.scandir(path) as it:
            for entry in it:
                name = entry.name
                if entry.is_dir():
                    folders.append((name, entry.path))
                elif not top and name[name.rfind(".") :].lower() in IMAGE_SUFFIXES:
                    images.append(name)
                else:
                    st = entry.stat()
                    files.append(f"f\x1f{rel}{name}\x1f{st.st_size}\x1f{st.st_mtime_ns}\n")
        files.sort()
        digest.update("".join(files).encode())
        if images:
            images.sort()
            names = hashlib.sha256("\n".join(images).encode()).hexdigest()
            digest.update(f"i\x1f{rel}\x1f{len(images)}\x1f{names}\x1f{folder.st_mtime_ns}\n".encode())
        for name, sub in sorted(folders):
            visit(sub, f"{rel}{name}/", False)

    visit(base, "", True)
    return digest.hexdigest()[:16]


def _remote_fingerprint(folder: UPath) -> str:
    base = folder.path.rstrip("/")
    listing = folder.fs.find(base, detail=True)  # one flat listing of the prefix, never from the cache
    digest = hashlib.sha256()
    for name in sorted(listing):
        info = listing[name]
        stamp = info.get("ETag") or info.get("LastModified") or info.get("mtime") or ""
        relative = name[len(base) :].lstrip("/") if name.startswith(base) else name
        digest.update(f"o\x1f{relative}\x1f{info.get('size')}\x1f{stamp}\n".encode())
    return digest.hexdigest()[:16]


def scan_fingerprint(uri: str, storage_options: dict[str, Any] | None = None) -> str:
    """Short hash of what the readers read, from listings only (see the module docstring for what is covered)."""
    folder = upath(uri, storage_options)
    if is_local(folder):
        return _local_fingerprint(folder.path)
    return _remote_fingerprint(folder)


def full_listing_fingerprint(uri: str, storage_options: dict[str, Any] | None = None) -> str:
    """The first version's fingerprint: every file's name, size and mtime/ETag, one fsspec ``info`` per file."""
    folder = upath(uri, storage_options)
    fs = folder.fs
    base = folder.path.rstrip("/")
    listing = fs.find(base, detail=True)
    digest = hashlib.sha256()
    for name in sorted(listing):
        info = listing[name]
        stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("created") or ""
        relative = name[len(base) :].lstrip("/") if name.startswith(base) else name
        digest.update(f"{relative}\x1f{info.get('size')}\x1f{stamp}\n".encode())
    return digest.hexdigest()[:16]


# --- one sensor tick ----------------------------------------------------------------------------------------------


@dataclass
class DiscoveryState:
    """What the sensor cursor remembers between ticks.

    ``scans`` maps each key to ``(folder relative to the root or None, fingerprint)``; the fingerprint
    is None for a scan discovered but not fingerprinted yet and ``ADOPTED`` for one taken over from a
    first-format cursor. ``next_key`` is where the rotation through known scans resumes.
    """

    scans: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    next_key: str = ""

    @classmethod
    def from_cursor(cls, cursor: str | None) -> DiscoveryState:
        if not cursor:
            return cls()
        data = json.loads(cursor)
        if isinstance(data, dict) and data.get("version") == CURSOR_VERSION:
            scans = {key: (entry[0], entry[1]) for key, entry in data["scans"].items()}
            return cls(scans, data.get("next", ""))
        # First format: {key: fingerprint of the full listing}. Those scans were built; keep them.
        return cls({key: (None, ADOPTED) for key in data})

    def to_cursor(self) -> str:
        scans = {key: [rel, fp] for key, (rel, fp) in sorted(self.scans.items())}
        return json.dumps({"version": CURSOR_VERSION, "next": self.next_key, "scans": scans}, sort_keys=True)


@dataclass
class TickResult:
    root: str
    scans: list[tuple[str, str]]  # (key, uri) of every scan found this tick, sorted by key
    changed: list[tuple[str, str, str]]  # (key, uri, fingerprint): new or changed scans to run
    checked: list[str]  # keys fingerprinted this tick, in the order they were taken
    max_scans: int
    max_seconds: float
    seconds: float
    discovery_complete: bool  # False when the deadline left some new folders undetected, or a folder unreadable
    state: DiscoveryState
    errors: list[str] = field(default_factory=list)  # scans whose folder could not be listed this tick
    skipped: list[str] = field(default_factory=list)  # folders under the root not taken, and why

    @property
    def ticks_per_pass(self) -> int:
        """Ticks needed to fingerprint every scan once at this tick's pace."""
        return max(1, math.ceil(len(self.scans) / max(len(self.checked), 1)))

    def summary(self) -> str:
        text = f"checked {len(self.checked)} of {len(self.scans)} scans in {self.seconds:.1f} s"
        if len(self.checked) < len(self.scans) or not self.discovery_complete:
            text += (
                f" (at most {self.max_scans} scans or {self.max_seconds:g} s per tick; the rest are checked in "
                f"the next ticks, every scan about once every {self.ticks_per_pass} ticks)"
            )
        if self.errors:
            text += f"; {len(self.errors)} could not be listed: " + "; ".join(self.errors[:3])
        if self.skipped:
            text += f"; {len(self.skipped)} folders skipped: " + "; ".join(self.skipped[:3])
        return text


def discovery_tick(
    root: str,
    storage_options: dict[str, Any] | None,
    state: DiscoveryState,
    *,
    max_scans: int,
    max_seconds: float,
    workers: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    exclude: str | None = None,
) -> TickResult:
    """One bounded discovery step: find scans, fingerprint new ones and the next known ones in rotation.

    A scan is reported in ``changed`` when it is new or its fingerprint differs from the one in
    ``state``; the returned state goes into the next tick. ``exclude`` (the output root) is left out of the
    walk when it lies below ``root``, as in ``discover``.
    """
    start = clock()
    deadline = start + max_seconds
    base = upath(root, storage_options)
    if workers is None:
        workers = 1 if is_local(base) else REMOTE_WORKERS
    known = {rel: key for key, (rel, _) in state.scans.items() if rel is not None}
    walk = _walk(base, known, workers, deadline, clock, exclude=folder_below(root, exclude, storage_options))
    uris = {key: str(_join(base, rel)) for key, rel in walk.found.items()}

    previous = {key: state.scans[key][1] if key in state.scans else None for key in walk.found}
    waiting = sorted(k for k in walk.found if previous[k] is None)
    adopted = sorted(k for k in walk.found if previous[k] == ADOPTED)
    rotation = sorted(k for k in walk.found if previous[k])
    at = bisect.bisect_right(rotation, state.next_key)
    order = (waiting + adopted + rotation[at:] + rotation[:at])[: max(max_scans, 1)]

    errors: list[str] = []

    def fingerprint(key: str) -> str | None:
        try:
            return scan_fingerprint(uris[key], storage_options)
        except FileNotFoundError:
            return None  # removed while this tick ran: it drops out of the next discovery
        except OSError as exc:  # unreadable now (permissions, network): checked again on its next turn
            errors.append(f"{key}: {exc}".splitlines()[0])
            return None

    done = _bounded_map(fingerprint, order, workers, deadline, clock)
    in_rotation = set(rotation)

    scans = dict(state.scans) if not walk.complete else {}
    for key, rel in walk.found.items():
        scans[key] = (rel, previous[key])
    changed = []
    next_key = state.next_key
    for key, fp in zip(order, done):
        if key in in_rotation:
            next_key = key
        if fp is None:
            continue
        if previous[key] != fp and previous[key] != ADOPTED:
            changed.append((key, uris[key], fp))
        scans[key] = (walk.found[key], fp)
    return TickResult(
        root=root,
        scans=sorted(uris.items()),
        changed=sorted(changed),
        checked=order[: len(done)],
        max_scans=max_scans,
        max_seconds=max_seconds,
        seconds=clock() - start,
        discovery_complete=walk.complete,
        state=DiscoveryState(scans, next_key),
        errors=sorted(errors),
        skipped=walk.problems,
    )
