"""Plain functional geometry on numpy arrays (boxes, distances, polygons, ray casting)."""
