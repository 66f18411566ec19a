import unittest

from stats import average, total


class StatsTest(unittest.TestCase):
    def test_total(self):
        self.assertEqual(total([1, 2, 3]), 6)

    def test_average(self):
        self.assertEqual(average([1, 2, 3]), 2)

    def test_average_of_nothing_is_zero(self):
        self.assertEqual(average([]), 0)


if __name__ == "__main__":
    unittest.main()
