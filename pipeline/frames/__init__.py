"""Frames stage: the all-frame sequence, the nested frame budgets, and the videos a model sees (budget and dummy)."""
