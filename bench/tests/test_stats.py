import unittest

import context  # noqa: F401  (puts bench/ on sys.path)
from pinbench import stats


def S(median, lo, hi, runs=3):
    return {"median": median, "min": lo, "max": hi, "runs": runs}


class TestSummary(unittest.TestCase):
    def test_odd_and_even_medians(self):
        self.assertEqual(stats.summarize([3.0, 1.0, 2.0]), S(2.0, 1.0, 3.0))
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
    def test_clearly_slower(self):
        self.assertTrue(stats.is_slower(S(1.0, 0.99, 1.01), S(1.2, 1.19, 1.21)))

    def test_faster_is_never_slower(self):
        self.assertFalse(stats.is_slower(S(1.0, 0.99, 1.01), S(0.5, 0.49, 0.51)))

    def test_within_floor_is_noise(self):
        # 3% slower, tight runs: below the 5% floor.
        self.assertFalse(stats.is_slower(S(1.0, 0.999, 1.001), S(1.03, 1.029, 1.031)))
        self.assertTrue(stats.is_slower(S(1.0, 0.999, 1.001), S(1.03, 1.029, 1.031), floor=0.01))

    def test_overlapping_ranges_are_noise(self):
        # Median 20% slower, but one plain run was slower than pinfast's best.
        self.assertFalse(stats.is_slower(S(1.0, 0.9, 1.25), S(1.2, 1.15, 1.22)))

    def test_wide_spread_raises_the_threshold(self):
        # Plain spread 30%: a 25% slower median is within noise even though
        # the ranges do not overlap.
        plain = S(1.0, 0.8, 1.1)
        self.assertAlmostEqual(stats.noise(plain, S(1.25, 1.2, 1.3)), 0.3)
        self.assertFalse(stats.is_slower(plain, S(1.25, 1.2, 1.3)))

    def test_single_run_uses_the_floor(self):
        self.assertTrue(stats.is_slower(S(1.0, 1.0, 1.0, 1), S(1.06, 1.06, 1.06, 1)))
        self.assertFalse(stats.is_slower(S(1.0, 1.0, 1.0, 1), S(1.04, 1.04, 1.04, 1)))

    def test_missing_plain(self):
        self.assertFalse(stats.is_slower(None, S(1, 1, 1)))


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
