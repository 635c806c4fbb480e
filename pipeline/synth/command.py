"""``scan2qa synth``: write synthetic scans in a dataset's native layout, one scene per worker process.

Rendering is the cost (every frame is ray cast at full resolution), and each
scene depends only on (seed, scene index, frames), so scenes are written in
parallel processes (``--workers``, default: ``SCAN2QA_WORKERS``, else every
core). The files are byte-identical to a serial run and to a run that wrote
other scenes before: each scene is staged beside the scans root
(``pipeline.synth.workspace``) and the parent moves it in, in scene order, so
the files several scenes share (the label map, written only when it is not
already there as it is; ARKitScenes' ``metadata.csv``, which each scene adds
its row to) are written by one process at a time. Each worker gets
``cores // workers`` library threads (``pipeline.threads``).

Adding scenes: scene ids run from ``--start`` (default 0), or with ``--add``
from one past the highest synthetic scene already under ``--out``. A scene
whose folder is already under ``--out`` is never written again (remove the
folder to have it rewritten), so ``--scenes 9`` on the demo's 8 scans writes
only ``synth0008_00`` and leaves the 8 untouched, bytes and times.

Progress: a line when a scene starts, at every quarter of its frames, and when
it is written (with its CPU seconds), so a long generation is never silent.

Stopping: SIGINT or SIGTERM ends the run within seconds: the workers are
terminated (killed after a short grace), their staging removed, and the root
holds only the complete scans written so far; the record kept beside it lets
the same command (or ``scan2qa build``'s demo) write the rest. A killed run
(SIGKILL) leaves its staging, removed by the next run; its workers die with it
(``pipeline.interrupts.die_with_parent``).
"""

from __future__ import annotations

import argparse
import errno
import multiprocessing
import os
import shutil
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from pipeline.synth.arkitscenes_writer import arkitscenes_video_id, write_arkitscenes, write_metadata
from pipeline.synth.multiscan_writer import multiscan_scan_id, write_multiscan
from pipeline.synth.rscan_writer import rscan_scan_id, write_3rscan
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scannetpp_writer import write_scannetpp
from pipeline.synth.scene import generate_scene, scene_id_for
from pipeline.synth.workspace import Workspace, unfinished_record

# format -> writer(scene, out, args, progress) -> scene folder
WRITERS = {
    "scannet": lambda scene, out, args, progress: write_scannet(scene, out, sens=args.sens, progress=progress),
    "scannetpp": lambda scene, out, args, progress: write_scannetpp(scene, out, progress=progress),
    "arkitscenes": lambda scene, out, args, progress: write_arkitscenes(
        scene, out, sky_direction=args.sky_direction, progress=progress
    ),
    "3rscan": lambda scene, out, args, progress: write_3rscan(scene, out, progress=progress),
    "multiscan": lambda scene, out, args, progress: write_multiscan(scene, out, progress=progress),
}
# format -> the name of scene ``scene_id``'s folder under the root, as its writer names it
FOLDER_NAMES = {
    "scannet": lambda scene: scene.scene_id,
    "scannetpp": lambda scene: scene.scene_id,
    "arkitscenes": arkitscenes_video_id,
    "3rscan": rscan_scan_id,
    "multiscan": multiscan_scan_id,
}
FORMATS = tuple(WRITERS)
WORKERS_VARIABLE = "SCAN2QA_WORKERS"
QUARTERS = 4  # progress lines per scene while it renders
MAX_SCENES = 10_000  # scene ids have four digits (synth0000_00 .. synth9999_00)
STOP_GRACE_SECONDS = 3.0  # a stopped run's workers get this long to end on SIGTERM before SIGKILL


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="scans root to write into (one folder per scene)")
    parser.add_argument("--scenes", type=int, default=1,
                        help="number of scenes (ids synth0000_00, synth0001_00, ... from --start)")
    first = parser.add_mutually_exclusive_group()
    first.add_argument("--start", type=int, default=None,
                       help="index of the first scene (default 0): --start 8 --scenes 1 writes synth0008_00")
    first.add_argument("--add", action="store_true",
                       help="start after the highest synthetic scene already under --out (0 when there is none)")
    parser.add_argument("--frames", type=int, default=300, help="frames per scene, at 10 fps")
    parser.add_argument("--seed", type=int, default=0, help="same seed gives byte-identical files")
    parser.add_argument("--sens", action="store_true", help="also write <scene>.sens (ScanNet's raw sensor stream)")
    parser.add_argument("--format", choices=FORMATS, default="scannet", help="native layout to write")
    parser.add_argument(
        "--sky-direction", choices=("Up", "Down", "Left", "Right"), default="Up", help="arkitscenes: where the sky is in the stored frames"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help=f"scenes written in parallel processes (default: ${WORKERS_VARIABLE}, else this machine's cores)",
    )
    parser.epilog = ("Scenes already under --out are never rewritten (remove a folder to write it again). "
                     "A stopped run (Ctrl-C, SIGTERM) leaves only complete scans under --out; the same command "
                     "writes the rest.")


@dataclass(frozen=True)
class SceneRequest:
    index: int
    scenes: int  # scenes this run writes (progress says [k/scenes])
    frames: int
    seed: int
    format: str
    sens: bool
    sky_direction: str
    position: int = 0  # 0-based place in this run


@dataclass(frozen=True)
class SceneWritten:
    index: int
    scene_id: str
    folder: str  # where the writer put it (the staging folder in a worker)
    cpu_seconds: float
    wall_seconds: float


def scene_folder_name(fmt: str, index: int) -> str:
    """The folder scene ``index`` gets under the root in layout ``fmt`` (without generating the scene)."""
    return FOLDER_NAMES[fmt](SimpleNamespace(scene_id=scene_id_for(index)))


def existing_scenes(out: Path, fmt: str) -> set[int]:
    """Indices of the synthetic scenes whose folders are under ``out`` in layout ``fmt``."""
    names = {e.name for e in out.iterdir() if e.is_dir()} if out.is_dir() else set()
    return {i for i in range(MAX_SCENES) if scene_folder_name(fmt, i) in names} if names else set()


def default_workers(scenes: int) -> int:
    from pipeline.threads import available_cores

    value = os.environ.get(WORKERS_VARIABLE, "").strip()
    workers = int(value) if value.isdigit() and int(value) > 0 else available_cores()
    return max(1, min(workers, scenes))


def _tag(request: SceneRequest) -> str:
    return f"[{request.position + 1}/{request.scenes}]"


def _describe(request: SceneRequest, scene) -> str:
    furniture = sum(1 for o in scene.objects if not o.small and not o.structural and o.label not in ("door", "window"))
    small = sum(1 for o in scene.objects if o.small)
    return (
        f"{_tag(request)} {scene.scene_id}: {scene.scene_type}, {len(scene.objects)} objects "
        f"({furniture} furniture, {small} small), {len(scene.mesh.triangles)} triangles; rendering {request.frames} frames"
    )


def write_scene(request: SceneRequest, out: Path, say) -> SceneWritten:
    """Generate and write one scene under ``out``; ``say(line)`` reports progress."""
    started_cpu, started = time.process_time(), time.perf_counter()
    scene = generate_scene(request.seed, request.index, request.frames)
    say(_describe(request, scene))
    marks = {max(1, (request.frames * q) // QUARTERS) for q in range(1, QUARTERS)}
    prefix = f"{_tag(request)} {scene.scene_id}"

    def progress(done: int, total: int) -> None:
        if done in marks and done < total:
            say(f"{prefix}: {done}/{total} frames")

    args = argparse.Namespace(sens=request.sens, sky_direction=request.sky_direction)
    folder = WRITERS[request.format](scene, out, args, progress)
    return SceneWritten(
        request.index, scene.scene_id, str(folder), time.process_time() - started_cpu, time.perf_counter() - started
    )


_progress = None  # a worker's end of the progress pipe


def _start_worker(progress, threads: int, parent: int) -> None:
    from pipeline.interrupts import die_with_parent
    from pipeline.threads import limit_threads

    die_with_parent(parent)  # a killed synth must not leave workers writing into its staging folders
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches every process: the parent decides
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's way to stop a worker mid-scene: at once
    limit_threads(threads)
    global _progress
    _progress = progress


def _write_in_worker(request: SceneRequest, staging: str) -> SceneWritten:
    return write_scene(request, Path(staging), _progress.send)


def _same_file(a: Path, b: Path) -> bool:
    return b.is_file() and a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


def _rename_or_copy(source: Path, target: Path) -> None:
    """``source`` to ``target`` in one rename; across file systems a copy under a hidden name, then a rename."""
    try:
        os.replace(source, target)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:  # the staging beside the root is on another file system
            raise
    incoming = target.with_name(f".{target.name}.incoming")
    try:
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, incoming)
        os.replace(incoming, target)
    finally:
        if incoming.is_dir():
            shutil.rmtree(incoming, ignore_errors=True)
        else:
            incoming.unlink(missing_ok=True)


def move_into(staging: Path, out: Path, written: SceneWritten, request: SceneRequest) -> Path:
    """Move a staged scene into ``out``: its folder in one rename, the shared files only where they differ.

    A label map already there with the same bytes is left as it is (adding scenes touches no existing file);
    ARKitScenes' ``metadata.csv`` gets the scene's row added, one process at a time. Returns the scene folder.
    """
    from pipeline.scene.readers.arkitscenes import METADATA_NAME

    folder = Path(written.folder).relative_to(staging)
    top = folder.parts[0]
    for source in sorted(staging.iterdir()):
        target = out / source.name
        if source.name == top:
            target.parent.mkdir(parents=True, exist_ok=True)
            _rename_or_copy(source, target)
        elif source.is_file() and source.name == METADATA_NAME and request.format == "arkitscenes":
            continue  # shared by every scene: the scene's row is added below
        elif source.is_file():
            if not _same_file(source, target):
                _rename_or_copy(source, target)
        else:
            raise ValueError(f"{source}: a writer left an unexpected folder beside its scene {top}")
    if request.format == "arkitscenes":
        # The row is keyed by the video id, the name of the folder the writer returned (not the scene id).
        write_metadata(out, folder.name, request.sky_direction)
    return out / folder


@contextmanager
def held_signals():
    """SIGINT and SIGTERM wait until a scene is in place (its folder, the shared files, the record), then act."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:
        signal.signal(signum, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught and callable(previous[caught[0]]):
            previous[caught[0]](caught[0], None)
        elif caught and previous[caught[0]] == signal.SIG_DFL:
            os.kill(os.getpid(), caught[0])


def _finished(request: SceneRequest, written: SceneWritten, folder: Path) -> str:
    return (
        f"{_tag(request)} {written.scene_id} -> {folder} "
        f"({written.wall_seconds:.1f} s, {written.cpu_seconds:.1f} CPU-s)"
    )


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """End the pool's workers now, mid-scene: SIGTERM, then SIGKILL after ``STOP_GRACE_SECONDS``."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # no public way before Python 3.14
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(1.0)


def run_parallel(requests: list[SceneRequest], out: Path, workspace: Workspace, workers: int,
                 landed=lambda request, folder: None) -> float:
    """Write every scene on ``workers`` processes; returns the workers' CPU seconds."""
    from pipeline.threads import threads_per_worker

    context = multiprocessing.get_context("spawn")  # Open3D keeps threads that do not survive fork
    # Progress lines come back on a pipe, not a multiprocessing queue: a queue's named semaphores, left behind by a
    # stopped run's workers, had the resource tracker warn about leaked semaphores on the way out. Each line is one
    # write of a few hundred bytes, atomic on a pipe, so the workers share its writing end.
    progress, progress_writer = context.Pipe(duplex=False)
    cpu = 0.0
    staged: dict[int, Path] = {}
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_start_worker,
        initargs=(progress_writer, threads_per_worker(workers), os.getpid()),
    )
    stopped = True
    try:
        pending = {}
        for request in requests:
            staged[request.index] = workspace.new_staging(request.index)
            pending[pool.submit(_write_in_worker, request, str(staged[request.index]))] = request
        finished: dict[int, SceneWritten] = {}
        next_to_move = 0
        while pending:
            done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            _drain(progress)
            for future in sorted(done, key=lambda f: pending[f].index):
                request = pending.pop(future)
                finished[request.index] = future.result()
            # Moved in scene order, so files several scenes write end as a serial run leaves them.
            while next_to_move < len(requests) and requests[next_to_move].index in finished:
                request = requests[next_to_move]
                written = finished[request.index]
                with held_signals():
                    folder = move_into(staged[request.index], out, written, request)
                    landed(request, folder)
                cpu += written.cpu_seconds
                print(_finished(request, written, folder), flush=True)
                next_to_move += 1
        _drain(progress)
        stopped = False
    finally:
        if stopped:  # a signal (or a failed scene): the scenes in flight are not waited for
            _stop_workers(pool)
        pool.shutdown(wait=not stopped, cancel_futures=True)
        progress.close()
        progress_writer.close()
        for folder in staged.values():
            shutil.rmtree(folder, ignore_errors=True)
    return cpu


def write_serially(requests: list[SceneRequest], out: Path, workspace: Workspace,
                   landed=lambda request, folder: None) -> None:
    """Each scene staged then moved into ``out``, as ``run_parallel`` does: a stopped run leaves no half scan."""
    for request in requests:
        staging = workspace.new_staging(request.index)
        try:
            written = write_scene(request, staging, lambda line: print(line, flush=True))
            with held_signals():
                folder = move_into(staging, out, written, request)
                landed(request, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        print(_finished(request, written, folder), flush=True)


def unfinished_request(out: str | os.PathLike) -> dict | None:
    """The arguments of an interrupted run recorded for ``out`` (for ``scan2qa build``'s demo), or None."""
    record = unfinished_record(out)
    try:
        request, scenes, start = record["request"], int(record["scenes"]), int(record.get("start", 0))
    except (KeyError, TypeError, ValueError):
        return None
    if not isinstance(request, dict) or set(request) != set(REQUEST_FIELDS) or scenes < 1 or start < 0:
        return None
    return {**request, "scenes": scenes, "start": start}


def _drain(progress) -> None:
    while progress.poll():
        print(progress.recv(), flush=True)


def first_index(args: argparse.Namespace, out: Path) -> int:
    if args.add:
        existing = existing_scenes(out, args.format)
        return max(existing) + 1 if existing else 0
    return 0 if args.start is None else args.start


def run(args: argparse.Namespace) -> int:
    if args.scenes < 1 or args.frames < 1:
        raise SystemExit(f"scan2qa synth: --scenes and --frames must be at least 1 (got {args.scenes}, {args.frames})")
    if args.workers is not None and args.workers < 1:
        raise SystemExit(f"scan2qa synth: --workers must be at least 1 (got {args.workers})")
    if (args.start or 0) < 0:
        raise SystemExit(f"scan2qa synth: --start must be at least 0 (got {args.start})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    workspace = Workspace(out)
    finished, todo, there = False, [], []
    try:
        removed, size = workspace.remove_stale()
        if removed:
            print(f"removed {removed} staging folder(s) ({size / 1e6:.1f} MB) an interrupted scan2qa synth left "
                  f"for {out}", flush=True)
        start = first_index(args, out)
        if start + args.scenes > MAX_SCENES:
            raise SystemExit(f"scan2qa synth: scene ids end at synth{MAX_SCENES - 1:04d}_00 "
                             f"(asked for {args.scenes} from {start})")
        indices = range(start, start + args.scenes)
        asked = request_fields(args)
        resumed = {i: f for i, f in workspace.already_written(asked).items() if i in indices}
        there = sorted(i for i in indices if (out / scene_folder_name(args.format, i)).is_dir())
        workspace.start(asked, args.scenes, start, {i: scene_folder_name(args.format, i) for i in there})
        todo = [i for i in indices if i not in there]
        if resumed:
            print(f"resuming an interrupted scan2qa synth: {len(there)} of {args.scenes} scans already written, "
                  f"writing the other {len(todo)}", flush=True)
        elif there:
            print(f"{len(there)} of the {args.scenes} scans ({scene_id_for(there[0])} ...) are already under {out} "
                  f"and are left as they are; writing the other {len(todo)}", flush=True)
        if args.format == "arkitscenes":
            _complete_metadata(out, there, args.sky_direction)
        requests = [SceneRequest(i, len(todo), args.frames, args.seed, args.format, bool(args.sens),
                                 args.sky_direction, position) for position, i in enumerate(todo)]
        cpu = _write(requests, out, args, workspace)
        finished = True
    except KeyboardInterrupt as exc:  # Interrupted: say what the root holds and how to finish it
        written = len(workspace.content.get("written", {})) if workspace.content else 0
        if hasattr(exc, "note") and workspace.content:
            exc.note = (f"; {written} of {args.scenes} scans are under {out}, nothing else; the same command "
                        f"writes the rest")
        raise
    finally:
        workspace.close(finished)
    print(
        f"wrote {len(todo)} scan(s) in the {args.format} layout under {out} "
        f"({time.perf_counter() - started:.1f} s, {cpu:.1f} CPU-s)"
    )
    return 0


def _complete_metadata(out: Path, there: list[int], sky_direction: str) -> None:
    """A scene folder moved in by a run killed before it added the scene's ``metadata.csv`` row gets it now."""
    import csv

    from pipeline.scene.readers.arkitscenes import METADATA_NAME

    path = out / METADATA_NAME
    rows = set()
    if path.exists():
        with open(path, newline="", encoding="utf-8") as fh:
            rows = {row.get("video_id") for row in csv.DictReader(fh)}
    for index in there:
        video_id = scene_folder_name("arkitscenes", index)
        if video_id not in rows:
            write_metadata(out, video_id, sky_direction)


REQUEST_FIELDS = ("frames", "seed", "format", "sens", "sky_direction")


def request_fields(args: argparse.Namespace) -> dict:
    """What decides a scene's files (not how many scenes or workers): a resumed run must match all of it."""
    return {"frames": args.frames, "seed": args.seed, "format": args.format, "sens": bool(args.sens),
            "sky_direction": args.sky_direction}


def _write(todo: list[SceneRequest], out: Path, args: argparse.Namespace, workspace: Workspace) -> float:
    """Write ``todo``; returns CPU seconds (this process and its workers)."""
    if not todo:
        return 0.0
    started_cpu = time.process_time()

    def landed(request: SceneRequest, folder: Path) -> None:
        workspace.landed(request.index, folder.relative_to(out).as_posix())

    workers = min(args.workers or default_workers(len(todo)), len(todo))
    if workers == 1:
        write_serially(todo, out, workspace, landed)
        return time.process_time() - started_cpu
    print(f"writing {len(todo)} scenes on {workers} worker processes", flush=True)
    return run_parallel(todo, out, workspace, workers, landed) + time.process_time() - started_cpu
