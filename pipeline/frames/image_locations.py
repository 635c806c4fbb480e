"""Where each frame's colour image is, as the ``frames`` table records it.

The scene step writes, per frame, the image file relative to the scan folder,
the member inside it (-1 for a plain image file) and the stored size. Both the
step that decodes images (``pipeline.scene.images.FrameImages``) and the one
that recognises an image it has decoded before (``pipeline.frames.frame_cache``)
read the same columns, so they read them here.
"""

from __future__ import annotations

import polars as pl

ImageLocation = tuple[str, int, tuple[int, int]]  # (file relative to the scan, member or -1, (width, height))


def image_locations(key: str, frames: pl.DataFrame) -> dict[int, ImageLocation]:
    """``frame_index -> ImageLocation`` for the scan's rows that name an image (a table without the column: none)."""
    rows = frames.filter(pl.col("key") == key) if "key" in frames.columns else frames
    if "image_file" not in rows.columns:
        return {}
    return {
        int(index): (str(file), int(member), (int(width), int(height)))
        for index, file, member, width, height in zip(
            rows["frame_index"].to_list(),
            rows["image_file"].fill_null("").to_list(),
            rows["image_member"].fill_null(-1).to_list(),
            rows["width"].to_list(),
            rows["height"].to_list(),
        )
        if file
    }
