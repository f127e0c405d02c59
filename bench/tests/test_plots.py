import os
import tempfile
import unittest

import context  # noqa: F401  (puts bench/ on sys.path)
from pinbench import plots, results


def canned_records():
    runs = []
    for v, f in (("plain", 1.0), ("pinfast", 0.25), ("pinned", 0.1)):
        ms = [{"name": "h2d_sync", "direction": "H2D", "bytes": n, "seconds": n / 5e9 * f}
              for n in (4096, 1 << 20)]
        runs.append({"workload": "sweep", "variant": v, "run": 0, "rc": 0,
                     "output": {"workload": "sweep", "measurements": ms}})
    return results.aggregate(runs, "m", "d")[0]


class TestPlots(unittest.TestCase):
    def test_speedup_rows_geomean_over_sizes(self):
        rows = dict(plots.speedup_rows(canned_records()))
        self.assertAlmostEqual(rows["sweep h2d_sync"]["pinfast"], 4.0)
        self.assertAlmostEqual(rows["sweep h2d_sync"]["pinned"], 10.0)

    @unittest.skipUnless(plots.have_matplotlib(), "matplotlib not installed")
    def test_pngs_written(self):
        recs = canned_records()
        with tempfile.TemporaryDirectory() as d:
            made = plots.bandwidth(recs, os.path.join(d, "x")) + plots.speedup(recs, os.path.join(d, "s.png"))
            self.assertEqual(len(made), 2)  # H2D only (no D2H records) + speed-up
            for p in made:
                self.assertGreater(os.path.getsize(p), 1000)


if __name__ == "__main__":
    unittest.main()
