"""scan2qa domain core: plain Python, no Dagster import."""
