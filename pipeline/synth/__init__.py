"""Built-in synthetic scans: furnished homes and offices with exact ground truth, written in native dataset layouts.

``generate_scene(seed, scene_index, frames)`` (``pipeline.synth.scene``) builds a ``SynthScene`` in memory:
objects made of boxes with exact gravity-aligned boxes, supports and analytic distances, a fine per-object
mesh, and a camera walk. ``write_scannet(scene, out_dir, sens=False)`` (``pipeline.synth.scannet_writer``)
writes it in ScanNet's layout with frames ray cast by the shared ``MeshRaycaster``; ``scan2qa synth`` is
``pipeline.synth.command``.
"""
