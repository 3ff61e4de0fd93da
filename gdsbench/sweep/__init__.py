"""`gdsbench sweep`: a grid of jobs (grid.py), measured point by point into a run (session.py)."""
