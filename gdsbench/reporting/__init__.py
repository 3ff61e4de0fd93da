"""What a person reads: the terminal summary, HTML reports and tier comparisons, and their charts."""
