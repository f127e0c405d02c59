"""Tests of tools/trace2svg.py: a Chrome trace as pinfast writes it (a copy,
its DMA and a worker's task, the tracks' names) drawn as an SVG with a row
per thread and a bar per event."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "trace2svg.py")
NS = "{http://www.w3.org/2000/svg}"
TRACE = [
    {"name": "thread_name", "ph": "M", "pid": 7, "tid": 8388608, "args": {"name": "DMA H2D"}},
    {"name": "cuMemcpyHtoD", "ph": "X", "pid": 7, "tid": 7, "ts": 10.0, "dur": 100.0,
     "args": {"direction": "H2D", "memory": "pageable", "bytes": 1 << 20, "path": "staged", "result": 0}},
    {"name": "thread_name", "ph": "M", "pid": 7, "tid": 8388625, "args": {"name": "pinfast worker 1"}},
    {"name": "host copy", "ph": "X", "pid": 7, "tid": 8388625, "ts": 12.0, "dur": 40.0,
     "args": {"direction": "H2D", "chunk": 0, "bytes": 1 << 20}},
    {"name": "DMA", "ph": "X", "pid": 7, "tid": 8388608, "ts": 55.0, "dur": 50.0,
     "args": {"direction": "H2D", "offset": 0, "bytes": 1 << 20, "slot": 0}},
]


class Trace2Svg(unittest.TestCase):
    def draw(self, *args):
        d = tempfile.mkdtemp(prefix="pinfast-svg-")
        self.addCleanup(shutil.rmtree, d)
        trace, out = os.path.join(d, "t.json"), os.path.join(d, "t.svg")
        with open(trace, "w") as f:
            json.dump(TRACE, f)
        subprocess.run([sys.executable, SCRIPT, trace, out, *args], check=True)
        return ET.parse(out).getroot()

    def test_rows_and_bars(self):
        svg = self.draw()
        labels = [t.text for t in svg.iter(NS + "text")]
        self.assertEqual(labels[:3], ["thread 7", "DMA H2D", "pinfast worker 1"])
        bars = [r for r in svg.iter(NS + "rect") if r.find(NS + "title") is not None]
        self.assertEqual(len(bars), 3)
        self.assertIn("cuMemcpyHtoD 1.0 MiB", labels)

    def test_window(self):
        svg = self.draw("--from", "53", "--to", "60")
        bars = [r for r in svg.iter(NS + "rect") if r.find(NS + "title") is not None]
        self.assertEqual(len(bars), 2)  # the copy and the DMA: the task ended at 52
