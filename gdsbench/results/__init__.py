"""Results on disk: runs saved point by point (store.py), the kinds of run (kinds.py), analysis with pandas."""
