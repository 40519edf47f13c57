"""An example package of abx ops written in Python (see ops.py)."""
