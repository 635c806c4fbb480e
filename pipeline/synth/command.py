"""``scan2qa synth``: write synthetic scans in a dataset's native layout (ScanNet for now)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pipeline.synth.arkitscenes_writer import write_arkitscenes
from pipeline.synth.multiscan_writer import write_multiscan
from pipeline.synth.rscan_writer import write_3rscan
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scannetpp_writer import write_scannetpp
from pipeline.synth.scene import generate_scene

# format -> writer(scene, out, args) -> scene folder
WRITERS = {
    "scannet": lambda scene, out, args: write_scannet(scene, out, sens=args.sens),
    "scannetpp": lambda scene, out, args: write_scannetpp(scene, out),
    "arkitscenes": lambda scene, out, args: write_arkitscenes(scene, out, sky_direction=args.sky_direction),
    "3rscan": lambda scene, out, args: write_3rscan(scene, out),
    "multiscan": lambda scene, out, args: write_multiscan(scene, out),
}
FORMATS = tuple(WRITERS)


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


def run(args: argparse.Namespace) -> int:
    if args.scenes < 1 or args.frames < 1:
        raise SystemExit(f"scan2qa synth: --scenes and --frames must be at least 1 (got {args.scenes}, {args.frames})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for index in range(args.scenes):
        start = time.perf_counter()
        scene = generate_scene(args.seed, index, args.frames)
        furniture = sum(1 for o in scene.objects if not o.small and not o.structural and o.label not in ("door", "window"))
        small = sum(1 for o in scene.objects if o.small)
        print(
            f"[{index + 1}/{args.scenes}] {scene.scene_id}: {scene.scene_type}, {len(scene.objects)} objects "
            f"({furniture} furniture, {small} small), {len(scene.mesh.triangles)} triangles; rendering {args.frames} frames",
            flush=True,
        )
        folder = WRITERS[args.format](scene, out, args)
        print(f"[{index + 1}/{args.scenes}] {scene.scene_id} -> {folder} ({time.perf_counter() - start:.1f} s)", flush=True)
    print(f"wrote {args.scenes} scan(s) in the {args.format} layout under {out}")
    return 0
