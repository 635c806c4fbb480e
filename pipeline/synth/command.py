"""``scan2qa synth``: write synthetic scans in a dataset's native layout, one scene per worker process.

Rendering is the cost (every frame is ray cast at full resolution), and each
scene depends only on (seed, scene index, frames), so scenes are written in
parallel processes (``--workers``, default: ``SCAN2QA_WORKERS``, else every
core). The files are byte-identical to a serial run: a worker writes its scene
into a hidden staging folder under ``--out`` and the parent moves the files
into place, so the files several scenes share (the label map; ARKitScenes'
``metadata.csv``, which each scene adds its row to) are written by one process
at a time, in scene order. Each worker gets ``cores // workers`` library
threads (``pipeline.threads``).

Progress: a line when a scene starts, at every quarter of its frames, and when
it is written (with its CPU seconds), so a long generation is never silent.

An interrupted run (Ctrl-C, a killed ``make demo``) resumes: every scene is
staged (serial runs too), so a scan folder under ``--out`` is always whole; a
run holds an exclusive lock on ``--out/.synth-unfinished.lock`` and keeps beside it ``.synth-unfinished.json``, which records
what it was asked for and each scene as it lands, and removes it when it ends.
The next run finds the record: it removes the staging folders the dead run
left (no live run holds the lock), says so, and writes only the scenes not
yet written when the request is the same (else all of them). ``scan2qa
build``'s demo resumes such a record too. Workers die with their parent
(``pipeline.interrupts.die_with_parent``), so a killed run leaves no process
writing into a staging folder.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from queue import Empty

from pipeline.errors import ConfigError

from pipeline.synth.arkitscenes_writer import write_arkitscenes, write_metadata
from pipeline.synth.multiscan_writer import write_multiscan
from pipeline.synth.rscan_writer import write_3rscan
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scannetpp_writer import write_scannetpp
from pipeline.synth.scene import generate_scene

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
FORMATS = tuple(WRITERS)
WORKERS_VARIABLE = "SCAN2QA_WORKERS"
QUARTERS = 4  # progress lines per scene while it renders
UNFINISHED_NAME = ".synth-unfinished.json"  # the record of a run until it ends (hidden: discovery skips it)
LOCK_NAME = ".synth-unfinished.lock"  # flock'ed by the run writing; the kernel drops it when that run dies
STAGING_NAME = re.compile(r"^\.synth-\d{4}-")  # a scene's staging folder: .synth-<index>-<random>


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="scans root to write into (one folder per scene)")
    parser.add_argument("--scenes", type=int, default=1, help="number of scenes (ids synth0000_00, synth0001_00, ...)")
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


@dataclass(frozen=True)
class SceneRequest:
    index: int
    scenes: int
    frames: int
    seed: int
    format: str
    sens: bool
    sky_direction: str


@dataclass(frozen=True)
class SceneWritten:
    index: int
    scene_id: str
    folder: str  # where the writer put it (the staging folder in a worker)
    cpu_seconds: float
    wall_seconds: float


def default_workers(scenes: int) -> int:
    from pipeline.threads import available_cores

    value = os.environ.get(WORKERS_VARIABLE, "").strip()
    workers = int(value) if value.isdigit() and int(value) > 0 else available_cores()
    return max(1, min(workers, scenes))


def _describe(request: SceneRequest, scene) -> str:
    furniture = sum(1 for o in scene.objects if not o.small and not o.structural and o.label not in ("door", "window"))
    small = sum(1 for o in scene.objects if o.small)
    return (
        f"[{request.index + 1}/{request.scenes}] {scene.scene_id}: {scene.scene_type}, {len(scene.objects)} objects "
        f"({furniture} furniture, {small} small), {len(scene.mesh.triangles)} triangles; rendering {request.frames} frames"
    )


def write_scene(request: SceneRequest, out: Path, say) -> SceneWritten:
    """Generate and write one scene under ``out``; ``say(line)`` reports progress."""
    started_cpu, started = time.process_time(), time.perf_counter()
    scene = generate_scene(request.seed, request.index, request.frames)
    say(_describe(request, scene))
    marks = {max(1, (request.frames * q) // QUARTERS) for q in range(1, QUARTERS)}
    prefix = f"[{request.index + 1}/{request.scenes}] {scene.scene_id}"

    def progress(done: int, total: int) -> None:
        if done in marks and done < total:
            say(f"{prefix}: {done}/{total} frames")

    args = argparse.Namespace(sens=request.sens, sky_direction=request.sky_direction)
    folder = WRITERS[request.format](scene, out, args, progress)
    return SceneWritten(
        request.index, scene.scene_id, str(folder), time.process_time() - started_cpu, time.perf_counter() - started
    )


_progress_queue = None


def _start_worker(queue, threads: int, parent: int) -> None:
    from pipeline.interrupts import die_with_parent
    from pipeline.threads import limit_threads

    die_with_parent(parent)  # a killed synth must not leave workers writing into its staging folders
    limit_threads(threads)
    global _progress_queue
    _progress_queue = queue


def _write_in_worker(request: SceneRequest, staging: str) -> SceneWritten:
    return write_scene(request, Path(staging), _progress_queue.put)


def move_into(staging: Path, out: Path, written: SceneWritten, request: SceneRequest) -> Path:
    """Move a staged scene's files into ``out`` as a serial run would have left them; returns the scene folder."""
    from pipeline.scene.readers.arkitscenes import METADATA_NAME

    for source in sorted(p for p in staging.rglob("*") if p.is_file()):
        relative = source.relative_to(staging)
        if relative.as_posix() == METADATA_NAME and request.format == "arkitscenes":
            continue  # shared by every scene: the scene's row is added below, one process at a time
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
    if request.format == "arkitscenes":
        # The row is keyed by the video id, the name of the folder the writer returned (not the scene id).
        write_metadata(out, Path(written.folder).name, request.sky_direction)
    return out / Path(written.folder).relative_to(staging)


def _finished(request: SceneRequest, written: SceneWritten, folder: Path) -> str:
    return (
        f"[{request.index + 1}/{request.scenes}] {written.scene_id} -> {folder} "
        f"({written.wall_seconds:.1f} s, {written.cpu_seconds:.1f} CPU-s)"
    )


def run_parallel(requests: list[SceneRequest], out: Path, workers: int, landed=lambda request, folder: None) -> float:
    """Write every scene on ``workers`` processes; returns the workers' CPU seconds."""
    from pipeline.threads import threads_per_worker

    context = multiprocessing.get_context("spawn")  # Open3D keeps threads that do not survive fork
    queue = context.Queue()
    cpu = 0.0
    staged: dict[int, Path] = {}
    try:
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_start_worker,
            initargs=(queue, threads_per_worker(workers), os.getpid()),
        ) as pool:
            pending = {}
            for request in requests:
                staged[request.index] = Path(tempfile.mkdtemp(prefix=f".synth-{request.index:04d}-", dir=out))
                pending[pool.submit(_write_in_worker, request, str(staged[request.index]))] = request
            finished: dict[int, SceneWritten] = {}
            next_to_move = 0
            while pending:
                done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                _drain(queue)
                for future in sorted(done, key=lambda f: pending[f].index):
                    request = pending.pop(future)
                    finished[request.index] = future.result()
                # Moved in scene order, so files several scenes write end as a serial run leaves them.
                while next_to_move < len(requests) and requests[next_to_move].index in finished:
                    request = requests[next_to_move]
                    written = finished[request.index]
                    folder = move_into(staged[request.index], out, written, request)
                    landed(request, folder)
                    cpu += written.cpu_seconds
                    print(_finished(request, written, folder), flush=True)
                    next_to_move += 1
            _drain(queue)
    finally:
        for folder in staged.values():
            shutil.rmtree(folder, ignore_errors=True)
    return cpu


def write_serially(requests: list[SceneRequest], out: Path, landed=lambda request, folder: None) -> None:
    """Each scene staged then moved into ``out``, as ``run_parallel`` does: a stopped run leaves no half scan."""
    for request in requests:
        staging = Path(tempfile.mkdtemp(prefix=f".synth-{request.index:04d}-", dir=out))
        try:
            written = write_scene(request, staging, lambda line: print(line, flush=True))
            folder = move_into(staging, out, written, request)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        landed(request, folder)
        print(_finished(request, written, folder), flush=True)


class UnfinishedRecord:
    """``--out/.synth-unfinished.json``: kept (and its lock held) while a run writes, read by the next run if this one dies.

    Holds the request (what decides the files: seed, frames, format, ...), the scenes asked for, and each
    scene's folder once it is in place. Replaced whole (a temporary name, then ``os.replace``), so a kill
    never leaves it cut short; the lock is on a file of its own beside it.
    """

    def __init__(self, out: Path):
        import fcntl

        self.path, self.lock_path = out / UNFINISHED_NAME, out / LOCK_NAME
        self.fh = open(self.lock_path, "a+", encoding="utf-8")
        try:
            fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.fh.close()
            raise ConfigError(f"{out}: another scan2qa synth is writing here ({self.lock_path} is locked)") from None
        try:
            self.previous = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.previous = None
        self.content: dict = {}

    def already_written(self, request: dict, out: Path) -> dict[int, str]:
        """Scene index -> folder, for the scenes an interrupted run of the same request put in place."""
        previous = self.previous if isinstance(self.previous, dict) else {}
        if previous.get("request") != request:
            return {}
        written = previous.get("written") if isinstance(previous.get("written"), dict) else {}
        return {int(i): f for i, f in written.items() if str(i).isdigit() and (out / str(f)).is_dir()}

    def start(self, request: dict, scenes: int, written: dict[int, str]) -> None:
        self.content = {"request": request, "scenes": scenes, "written": {str(i): f for i, f in sorted(written.items())}}
        self._save()

    def landed(self, index: int, folder: str) -> None:
        self.content["written"][str(index)] = folder
        self._save()

    def _save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(self.content, sort_keys=True))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def close(self, finished: bool) -> None:
        if finished:  # removed while still locked: no other run can have taken it
            self.path.unlink(missing_ok=True)
            self.lock_path.unlink(missing_ok=True)
        self.fh.close()


def unfinished_request(out: str | os.PathLike) -> dict | None:
    """The arguments of an interrupted run recorded under ``out`` (for ``scan2qa build``'s demo), or None."""
    try:
        record = json.loads((Path(out) / UNFINISHED_NAME).read_text(encoding="utf-8"))
        request, scenes = record["request"], int(record["scenes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(request, dict) or set(request) != set(REQUEST_FIELDS) or scenes < 1:
        return None
    return {**request, "scenes": scenes}


def remove_stale_staging(out: Path) -> tuple[int, int]:
    """Remove the scene staging folders a dead run left under ``out`` (the caller holds the lock); (count, bytes)."""
    count = size = 0
    for entry in sorted(out.iterdir()):
        if STAGING_NAME.match(entry.name) and entry.is_dir() and not entry.is_symlink():
            size += sum(p.stat().st_size for p in entry.rglob("*") if p.is_file() and not p.is_symlink())
            shutil.rmtree(entry, ignore_errors=True)
            count += 1
    return count, size


def _drain(queue) -> None:
    while True:
        try:
            print(queue.get_nowait(), flush=True)
        except Empty:
            return


def run(args: argparse.Namespace) -> int:
    if args.scenes < 1 or args.frames < 1:
        raise SystemExit(f"scan2qa synth: --scenes and --frames must be at least 1 (got {args.scenes}, {args.frames})")
    if args.workers is not None and args.workers < 1:
        raise SystemExit(f"scan2qa synth: --workers must be at least 1 (got {args.workers})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    requests = [
        SceneRequest(i, args.scenes, args.frames, args.seed, args.format, bool(args.sens), args.sky_direction)
        for i in range(args.scenes)
    ]
    started = time.perf_counter()
    record = UnfinishedRecord(out)
    finished = False
    try:
        removed, size = remove_stale_staging(out)
        if removed:
            print(f"removed {removed} staging folder(s) ({size / 1e6:.1f} MB) an interrupted scan2qa synth left "
                  f"under {out}", flush=True)
        asked = request_fields(args)
        done = record.already_written(asked, out)
        done = {i: f for i, f in done.items() if i < args.scenes}
        record.start(asked, args.scenes, done)
        todo = [request for request in requests if request.index not in done]
        if done:
            print(f"resuming an interrupted scan2qa synth: {len(done)} of {args.scenes} scans already written, "
                  f"writing the other {len(todo)}", flush=True)
        cpu = _write(todo, out, args, record)
        finished = True
    finally:
        record.close(finished)
    print(
        f"wrote {len(todo)} scan(s) in the {args.format} layout under {out} "
        f"({time.perf_counter() - started:.1f} s, {cpu:.1f} CPU-s)"
    )
    return 0


REQUEST_FIELDS = ("frames", "seed", "format", "sens", "sky_direction")


def request_fields(args: argparse.Namespace) -> dict:
    """What decides a scene's files (not how many scenes or workers): a resumed run must match all of it."""
    return {"frames": args.frames, "seed": args.seed, "format": args.format, "sens": bool(args.sens),
            "sky_direction": args.sky_direction}


def _write(todo: list[SceneRequest], out: Path, args: argparse.Namespace, record: UnfinishedRecord) -> float:
    """Write ``todo``; returns CPU seconds (this process and its workers)."""
    if not todo:
        return 0.0
    started_cpu = time.process_time()

    def landed(request: SceneRequest, folder: Path) -> None:
        record.landed(request.index, folder.relative_to(out).as_posix())

    workers = min(args.workers or default_workers(len(todo)), len(todo))
    if workers == 1:
        write_serially(todo, out, landed)
        return time.process_time() - started_cpu
    print(f"writing {len(todo)} scenes on {workers} worker processes", flush=True)
    return run_parallel(todo, out, workers, landed) + time.process_time() - started_cpu
