"""The job: its options, units, errors, modes, and the Result it yields."""
