"""pinbench: the logic of the bench harness (bench/run), importable so that
bench/tests can check it on canned measurements without a GPU."""
