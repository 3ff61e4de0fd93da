"""Results on disk: runs saved point by point, sweeps over grids of options, analysis with pandas."""
