import time
import unittest

from calc import arith


class SlowTest(unittest.TestCase):
    def test_many(self):
        time.sleep(2)
        self.assertEqual(sum(arith.add(i, 1) for i in range(10)), 55)


if __name__ == "__main__":
    unittest.main()
