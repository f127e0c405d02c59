import unittest

import context  # noqa: F401  (puts bench/ on sys.path)
from pinbench import stats


def S(median, lo, hi, runs=3):
    return {"median": median, "min": lo, "max": hi, "runs": runs}


def R(*values):
    """The summary of runs taking these times."""
    return stats.summarize(list(values))


class TestSummary(unittest.TestCase):
    def test_odd_and_even_medians(self):
        self.assertEqual(stats.summarize([3.0, 1.0, 2.0]),
                         dict(S(2.0, 1.0, 3.0), values=[1.0, 2.0, 3.0]))
        self.assertEqual(stats.summarize([4.0, 1.0, 2.0, 3.0])["median"], 2.5)

    def test_empty_is_an_error(self):
        with self.assertRaises(ValueError):
            stats.summarize([])

    def test_spread(self):
        self.assertAlmostEqual(stats.spread(S(2.0, 1.9, 2.3)), 0.2)
        self.assertEqual(stats.spread(S(2.0, 2.0, 2.0, runs=1)), 0.0)


class TestRatio(unittest.TestCase):
    def test_ratio_is_plain_over_variant(self):
        self.assertAlmostEqual(stats.ratio_to_plain(S(1.0, 1, 1), S(0.25, 0.25, 0.25)), 4.0)

    def test_missing_or_zero(self):
        self.assertIsNone(stats.ratio_to_plain(None, S(1, 1, 1)))
        self.assertIsNone(stats.ratio_to_plain(S(0, 0, 0), S(1, 1, 1)))

    def test_geomean(self):
        self.assertAlmostEqual(stats.geomean([2.0, 8.0]), 4.0)
        self.assertIsNone(stats.geomean([None, 0]))


class TestSlower(unittest.TestCase):
    PLAIN5 = R(0.99, 1.0, 1.01, 0.995, 1.005)

    def test_clearly_slower(self):
        self.assertTrue(stats.is_slower(self.PLAIN5, R(1.2, 1.19, 1.21, 1.2, 1.22)))

    def test_faster_is_never_slower(self):
        self.assertIsNone(stats.verdict(self.PLAIN5, R(0.5, 0.49, 0.51, 0.5, 0.5)))

    def test_within_floor_is_noise(self):
        # 3% slower, tight runs: below the 5% floor.
        plain, pf = R(0.999, 1.0, 1.001, 1.0, 1.0), R(1.029, 1.03, 1.031, 1.03, 1.03)
        self.assertIsNone(stats.verdict(plain, pf))
        self.assertTrue(stats.is_slower(plain, pf, floor=0.01))

    def test_overlapping_ranges_are_noise(self):
        # Median 20% slower, but plain's runs spread as far as pinfast's.
        plain, pf = R(0.9, 1.0, 1.25, 0.95, 1.05), R(1.15, 1.2, 1.22, 1.2, 1.21)
        self.assertFalse(stats.is_slower(plain, pf))

    def test_wide_spread_raises_the_threshold(self):
        # Plain spread 30%: a 25% slower median is within noise even though
        # the ranges do not overlap.
        plain = R(0.8, 1.0, 1.1, 1.0, 1.0)
        pf = R(1.2, 1.25, 1.3, 1.25, 1.25)
        self.assertAlmostEqual(stats.noise(plain, pf), 0.3)
        self.assertIsNone(stats.verdict(plain, pf))

    def test_three_runs_are_never_enough(self):
        """What --quick saw on the H100: pass-through cells 0.75-0.92x from 3
        runs. All 3 above all 3 happens by chance 1 time in 20: within noise."""
        plain, pf = R(1.0, 1.01, 0.99), R(1.3, 1.31, 1.29)
        self.assertAlmostEqual(stats.p_slower(plain["values"], pf["values"]), 1 / 20)
        self.assertEqual(stats.verdict(plain, pf), "within noise")
        self.assertFalse(stats.is_slower(plain, pf))

    def test_more_runs_decide(self):
        # the same slowdown over 4 runs (p = 1/70) is still not enough; over 5 (1/252) it is
        self.assertEqual(stats.verdict(R(1.0, 1.01, 0.99, 1.0), R(1.3, 1.31, 1.29, 1.3)),
                         "within noise")
        self.assertEqual(stats.verdict(R(1.0, 1.01, 0.99, 1.0, 1.0),
                                       R(1.3, 1.31, 1.29, 1.3, 1.3)), "slower")

    def test_a_run_that_more_runs_take_back(self):
        """Process-level modes: 3 slow pinfast runs, then 4 more like plain's."""
        plain = [1.0, 1.01, 0.99, 1.3, 1.0, 1.02, 0.98]
        pf = [1.3, 1.31, 1.29, 1.0, 1.01, 0.99, 1.0]
        self.assertEqual(stats.verdict(R(*plain[:3]), R(*pf[:3])), "within noise")
        self.assertIsNone(stats.verdict(R(*plain), R(*pf)))

    def test_single_run_uses_the_floor(self):
        self.assertEqual(stats.verdict(R(1.0), R(1.06)), "within noise")
        self.assertIsNone(stats.verdict(R(1.0), R(1.04)))

    def test_exact_rank_probabilities(self):
        self.assertAlmostEqual(stats.p_slower([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]), 1 / 252)
        self.assertAlmostEqual(stats.p_slower([1, 2, 3], [4, 5, 6, 7]), 1 / 35)
        self.assertAlmostEqual(stats.p_slower([1, 3], [2, 4]), 2 / 6)   # U=3: 2 orders of 6 reach it
        self.assertEqual(stats.p_slower([2, 3], [0, 1]), 1.0)
        self.assertAlmostEqual(stats.p_slower([1.0], [1.0]), 0.5)       # a tie: U = 1/2

    def test_missing_plain(self):
        self.assertFalse(stats.is_slower(None, R(1, 1, 1)))


class TestLosses(unittest.TestCase):
    def test_equal_and_close(self):
        self.assertTrue(stats.losses_match([2.3, 1.1], [2.3, 1.1]))
        self.assertTrue(stats.losses_match([2.3, 1.1], [2.3000001, 1.1]))

    def test_different(self):
        self.assertFalse(stats.losses_match([2.3, 1.1], [2.3, 1.5]))
        self.assertFalse(stats.losses_match([2.3, 1.1], [2.3]))
        self.assertFalse(stats.losses_match(None, [1.0]))


if __name__ == "__main__":
    unittest.main()
