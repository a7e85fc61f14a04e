"""Tests for calc.py, with the standard library only. Run them with: python -m unittest -v"""

import unittest

from calc import mean, median, value_range


class MeanTests(unittest.TestCase):
    def test_mean(self) -> None:
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_mean_of_nothing_raises(self) -> None:
        with self.assertRaises(ValueError):
            mean([])


class MedianTests(unittest.TestCase):
    def test_median_of_sorted_values(self) -> None:
        self.assertEqual(median([1, 2, 3]), 2)

    def test_median_of_unsorted_values(self) -> None:
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_of_an_even_count(self) -> None:
        self.assertEqual(median([4, 1, 3, 2]), 2.5)


class RangeTests(unittest.TestCase):
    def test_value_range(self) -> None:
        self.assertEqual(value_range([5, 1, 9]), 8)


if __name__ == "__main__":
    unittest.main()
