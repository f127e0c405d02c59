import unittest

import context  # noqa: F401  (puts bench/ on sys.path)
from pinbench import results, scaling

MiB = 1 << 20


def meas(name, direction, nbytes, seconds):
    return {"name": name, "direction": direction, "bytes": nbytes, "seconds": seconds,
            "min_s": seconds, "max_s": seconds, "reps": 5}


def run(variant, k, gpus, single_s, all_s, gpu_s):
    """One multigpu run: GPU 0 alone takes single_s per 64 MiB copy, every
    GPU at once all_s (aggregate, bytes = 64 MiB x gpus)."""
    ms = [meas("single", "H2D", 64 * MiB, single_s)]
    ms += [meas("gpu%d" % g, "H2D", 64 * MiB, gpu_s) for g in range(gpus)]
    ms.append(meas("all", "H2D", 64 * MiB * gpus, all_s))
    return {"workload": "multigpu", "variant": variant, "run": k, "rc": 0, "error": "",
            "wall_s": 1.0, "stats_files": [],
            "output": {"workload": "multigpu", "params": {"gpus": gpus}, "measurements": ms}}


def records(runs):
    recs, problems, _ = results.aggregate(runs, "m", "d")
    assert problems == []
    return recs


class TestScaling(unittest.TestCase):
    def test_ratio_and_floor(self):
        # plain: 2 GPUs take 1.25x GPU 0's time for twice the bytes: 1.6x, below 1.7
        # pinfast: 1.05x the time: 1.905x
        runs = []
        for k, jitter in enumerate((1.0, 1.02, 0.98)):
            runs.append(run("plain", k, 2, 0.010 * jitter, 0.0125 * jitter, 0.012))
            runs.append(run("pinfast", k, 2, 0.002 * jitter, 0.0021 * jitter, 0.002))
        rows = scaling.rows(records(runs))
        by = {r["variant"]: r for r in rows}
        self.assertEqual(set(by), {"plain", "pinfast"})
        self.assertAlmostEqual(by["plain"]["ratio"], 1.6)
        self.assertAlmostEqual(by["pinfast"]["ratio"], 2 * 0.002 / 0.0021)
        self.assertEqual(by["pinfast"]["bytes"], 64 * MiB)
        self.assertEqual(by["pinfast"]["gpus"], 2)
        self.assertAlmostEqual(by["plain"]["floor"], 1.7)
        self.assertTrue(by["plain"]["below"])
        self.assertFalse(by["pinfast"]["below"])
        self.assertEqual(scaling.below(rows), [])
        self.assertEqual(scaling.below(rows, "plain"), [by["plain"]])
        table = scaling.markdown_table(rows)
        self.assertIn("| multigpu | plain | H2D | 64 MiB | 2 |", table)
        self.assertIn("1.60x | **BELOW 1.70x** |", table)
        self.assertIn("1.90x |  |", table)

    def test_one_gpu_is_never_below(self):
        rows = scaling.rows(records([run("pinfast", 0, 1, 0.002, 0.004, 0.004)]))
        self.assertEqual(len(rows), 1)
        self.assertAlmostEqual(rows[0]["ratio"], 0.5)
        self.assertFalse(rows[0]["below"])

    def test_other_workloads_give_no_rows(self):
        sweep = {"workload": "sweep", "variant": "plain", "run": 0, "rc": 0, "error": "", "wall_s": 1,
                 "stats_files": [], "output": {"workload": "sweep", "params": {},
                                               "measurements": [meas("h2d_sync", "H2D", MiB, 0.001)]}}
        rows = scaling.rows(records([sweep]))
        self.assertEqual(rows, [])
        self.assertEqual(scaling.markdown_table(rows), "")

    def test_all_without_single_is_skipped(self):
        r = run("plain", 0, 2, 0.01, 0.0125, 0.012)
        r["output"]["measurements"] = r["output"]["measurements"][1:]
        self.assertEqual(scaling.rows(records([r])), [])


if __name__ == "__main__":
    unittest.main()
