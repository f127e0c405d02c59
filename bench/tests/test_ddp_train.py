"""bench/py/ddp_train.py without a GPU: the launcher skips cleanly where
torch or a GPU is missing; where torch is installed, two runs of its CPU
mode (--cpu: two ranks over gloo, the same loader and model code) give
bitwise the same losses, with pin_memory asked for or not, and the JSON
line the harness reads."""
import importlib.util
import json
import os
import subprocess
import sys
import unittest

import context  # noqa: F401  (puts bench/ on sys.path)

SCRIPT = os.path.join(context.BENCH, "py", "ddp_train.py")
HAVE_TORCH = importlib.util.find_spec("torch") is not None
SMALL = ["--model", "cnn", "--steps", "8", "--warmup-steps", "2", "--batch", "8", "--side", "32",
         "--workers", "2", "--timeout", "240"]


def run(*args, env=None):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                       cwd=os.path.dirname(SCRIPT), timeout=300, env=env)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    return p, json.loads(lines[-1]) if lines else None


class TestDdpTrain(unittest.TestCase):
    def test_skips_without_torch_or_gpu(self):
        # no GPU visible: a skip line and exit 0 (or "no torch" where torch is missing)
        p, doc = run("--steps", "2", "--warmup-steps", "1",
                     env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["workload"], "ddp_train")
        self.assertIn(doc["skipped"], ("no torch", "no GPU"))

    def test_bad_arguments(self):
        p, _ = run("--steps", "5", "--warmup-steps", "5")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--warmup-steps", p.stderr)

    @unittest.skipUnless(HAVE_TORCH, "no torch")
    def test_cpu_runs_bitwise_alike(self):
        docs = []
        for extra in ([], [], ["--pinned"]):
            p, doc = run("--cpu", *SMALL, *extra)
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
            docs.append(doc)
        m = [d["measurements"][0] for d in docs]
        self.assertEqual(m[0]["name"], "step")
        self.assertEqual(m[0]["unit"], "samples")
        self.assertEqual(m[0]["items"], 2 * 8)           # two ranks' batches a step
        self.assertEqual(len(m[0]["losses"]), 8)         # rank 0's, every step
        self.assertEqual(docs[0]["params"]["timed_steps"], 6)
        self.assertEqual(docs[2]["mode"], "pinned")
        self.assertEqual(len({x["loss_hash"] for x in m}), 1, [x["loss_hash"] for x in m])
        self.assertEqual(m[0]["losses"], m[1]["losses"])


if __name__ == "__main__":
    unittest.main()
