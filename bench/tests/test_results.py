import json
import os
import tempfile
import unittest

import context  # noqa: F401  (puts bench/ on sys.path)
from pinbench import results


def meas(name, direction, nbytes, seconds, **kw):
    m = {"name": name, "direction": direction, "bytes": nbytes, "seconds": seconds,
         "min_s": seconds, "max_s": seconds, "reps": 3}
    m.update(kw)
    return m


def run(workload, variant, k, measurements, rc=0):
    return {"workload": workload, "variant": variant, "run": k, "rc": rc, "error": "",
            "wall_s": 1.0, "stats_files": [],
            "output": {"workload": workload, "params": {"p": 1}, "measurements": measurements}}


def sweep_runs(pf_times):
    """A run of each variant of a one-size sweep per pinfast time; plain takes ~1 s."""
    runs = []
    for k in range(len(pf_times)):
        runs.append(run("sweep", "plain", k, [meas("h2d_sync", "H2D", 1 << 20, [1.0, 1.01, 0.99][k % 3])]))
        runs.append(run("sweep", "pinfast", k, [meas("h2d_sync", "H2D", 1 << 20, pf_times[k])]))
        runs.append(run("sweep", "pinned", k, [meas("h2d_sync", "H2D", 1 << 20, 0.1)]))
    return runs


class TestAggregate(unittest.TestCase):
    def test_records_and_ratios(self):
        recs, problems, skipped = results.aggregate(sweep_runs([0.5, 0.52, 0.48]), "m", "d")
        self.assertEqual(problems, [])
        self.assertEqual(skipped, {})
        by = {r["variant"]: r for r in recs}
        self.assertEqual(set(by), {"plain", "pinfast", "pinned"})
        pf = by["pinfast"]
        self.assertEqual(pf["seconds"], 0.5)
        self.assertEqual((pf["min_s"], pf["max_s"], pf["runs"]), (0.48, 0.52, 3))
        self.assertAlmostEqual(pf["ratio_to_plain"], 2.0)
        self.assertAlmostEqual(pf["gbps"], (1 << 20) / 0.5 / 1e9)
        self.assertFalse(pf["slower"])
        self.assertAlmostEqual(by["pinned"]["ratio_to_plain"], 10.0)
        self.assertEqual(by["plain"]["ratio_to_plain"], 1.0)
        for field in ("machine", "date", "workload", "variant", "direction", "bytes", "seconds",
                      "runs", "min_s", "max_s", "ratio_to_plain", "gbps"):
            self.assertIn(field, pf)
        self.assertNotIn("slower", by["pinned"])  # only pinfast is judged

    def test_slower_is_marked(self):
        recs, _, _ = results.aggregate(sweep_runs([1.3, 1.31, 1.29, 1.3, 1.32]), "m", "d")
        slow = results.slower_records(recs)
        self.assertEqual([(r["workload"], r["variant"]) for r in slow], [("sweep", "pinfast")])
        self.assertEqual(results.within_noise_records(recs), [])
        self.assertAlmostEqual(slow[0]["p_slower"], 1 / 252)
        table = results.markdown_table(recs)
        self.assertIn("SLOWER", table)

    def test_three_runs_are_within_noise(self):
        recs, _, _ = results.aggregate(sweep_runs([1.3, 1.31, 1.29]), "m", "d")
        self.assertEqual(results.slower_records(recs), [])
        unsure = results.within_noise_records(recs)
        self.assertEqual([(r["variant"], r["runs_s"]) for r in unsure],
                         [("pinfast", [1.29, 1.3, 1.31])])
        table = results.markdown_table(recs)
        self.assertIn("| within noise |", table)
        self.assertNotIn("SLOWER", table)

    def test_failed_run_is_a_problem_and_excluded(self):
        runs = sweep_runs([0.5, 0.5, 0.5])
        runs[1]["rc"] = 2
        runs[1]["error"] = "MISMATCH: h2d_sync"
        recs, problems, _ = results.aggregate(runs, "m", "d")
        self.assertEqual(len(problems), 1)
        self.assertIn("FAILED sweep pinfast run 0", problems[0])
        pf = [r for r in recs if r["variant"] == "pinfast"][0]
        self.assertEqual(pf["runs"], 2)

    def test_skipped_workload(self):
        runs = [{"workload": "torch_copy", "variant": "plain", "run": 0, "rc": 0, "error": "",
                 "output": {"workload": "torch_copy", "skipped": "no torch"}}]
        recs, problems, skipped = results.aggregate(runs, "m", "d")
        self.assertEqual((recs, problems, skipped), ([], [], {"torch_copy": "no torch"}))
        self.assertIn("skipped: no torch", results.markdown_table(recs, problems, skipped))

    def test_losses_compared_with_plain(self):
        def tr(variant, k, losses):
            return run("torch_train", variant, k,
                       [meas("epoch", "H2D", 100, 2.0, unit="samples", items=512, rate=256, losses=losses)])
        runs = [tr("plain", 0, [2.3, 2.0]), tr("pinfast", 0, [2.3, 2.0]), tr("pinned", 0, [2.3, 2.5])]
        recs, problems, _ = results.aggregate(runs, "m", "d")
        by = {r["variant"]: r for r in recs}
        self.assertTrue(by["pinfast"]["losses_match"])
        self.assertFalse(by["pinned"]["losses_match"])
        self.assertEqual(len(problems), 1)
        self.assertIn("MISMATCH torch_train epoch pinned", problems[0])
        self.assertAlmostEqual(by["plain"]["rate"], 256.0)
        self.assertIn("MISMATCH", results.markdown_table(recs))

    def test_loss_hash_bitwise_with_plain(self):
        """ddp_train hashes its losses: pinfast must hash as plain does in
        every run; pinned is recorded, not judged; plain's runs must agree."""
        def dt(variant, k, h):
            return run("ddp_train", variant, k,
                       [meas("step", "H2D", 100, 0.05, unit="samples", items=384, rate=7680,
                             losses=[2.3, 2.2], loss_hash=h)])
        runs = [dt("plain", 0, "aa"), dt("pinfast", 0, "aa"), dt("pinned", 0, "cc"),
                dt("plain", 1, "aa"), dt("pinfast", 1, "aa"), dt("pinned", 1, "aa")]
        recs, problems, _ = results.aggregate(runs, "m", "d")
        by = {r["variant"]: r for r in recs}
        self.assertEqual(problems, [])
        self.assertEqual(by["pinfast"]["loss_hashes"], ["aa", "aa"])
        self.assertTrue(by["pinfast"]["loss_hash_match"])
        self.assertFalse(by["pinned"]["loss_hash_match"])
        self.assertNotIn("MISMATCH", results.markdown_table(recs))
        # one pinfast run differs: a problem and a mark
        runs[4] = dt("pinfast", 1, "ab")
        recs, problems, _ = results.aggregate(runs, "m", "d")
        self.assertEqual(problems, ["MISMATCH ddp_train step pinfast: losses not bitwise plain's "
                                    "(hash aa,ab, plain aa)"])
        self.assertIn("**MISMATCH**", results.markdown_table(recs))
        # plain's own runs differ: the check says nothing, the workload is at fault
        runs[3] = dt("plain", 1, "ba")
        recs, problems, _ = results.aggregate(runs, "m", "d")
        self.assertIsNone({r["variant"]: r for r in recs}["pinfast"]["loss_hash_match"])
        self.assertEqual(problems, ["NONDETERMINISTIC ddp_train step: plain's runs hash their "
                                    "losses 2 ways"])

    def test_measurements_keyed_by_name_direction_bytes(self):
        runs = [run("small", "plain", 0, [meas("h2d_sync", "H2D", 4, 1e-5), meas("h2d_sync", "H2D", 64, 2e-5)]),
                run("small", "pinfast", 0, [meas("h2d_sync", "H2D", 64, 1e-5), meas("h2d_sync", "H2D", 4, 1e-5)])]
        recs, _, _ = results.aggregate(runs, "m", "d")
        pf = {r["bytes"]: r for r in recs if r["variant"] == "pinfast"}
        self.assertAlmostEqual(pf[4]["ratio_to_plain"], 1.0)
        self.assertAlmostEqual(pf[64]["ratio_to_plain"], 2.0)


class TestOutput(unittest.TestCase):
    def test_jsonl_one_record_per_line(self):
        recs, _, _ = results.aggregate(sweep_runs([0.5, 0.5, 0.5]), "h100", "2026-01-01 00:00:00",
                                       extra={"commit": "abc"})
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.jsonl")
            results.write_jsonl(path, recs)
            with open(path) as f:
                lines = [json.loads(line) for line in f]
        self.assertEqual(len(lines), 3)
        self.assertTrue(all(r["machine"] == "h100" and r["commit"] == "abc" for r in lines))

    def test_formatting(self):
        self.assertEqual(results.fmt_size(1 << 30), "1 GiB")
        self.assertEqual(results.fmt_size(4096), "4 KiB")
        self.assertEqual(results.fmt_size(4), "4 B")
        self.assertEqual(results.fmt_value({"seconds": 0.5, "gbps": 2.0}), "2.00 GB/s")
        self.assertEqual(results.fmt_value({"seconds": 0.5, "unit": "frames", "rate": 100.0}), "100 frames/s")
        self.assertEqual(results.fmt_value({"seconds": 0.0125}), "12.5 ms")
        self.assertEqual(results.fmt_ratio(None), "-")


if __name__ == "__main__":
    unittest.main()
